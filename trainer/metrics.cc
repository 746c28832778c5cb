#include "trainer/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

namespace evoscale::trainer {

double ExactAuc(const std::vector<float>& scores, const std::vector<float>& labels) {
  const size_t n = std::min(scores.size(), labels.size());
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  double positives = 0, rank_sum = 0;
  size_t i = 0;
  while (i < n) {
    size_t j = i;
    double group_pos = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) {
      group_pos += labels[order[j]] > 0.5f ? 1 : 0;
      ++j;
    }
    // Ranks i+1..j share their mean rank.
    rank_sum += group_pos * (double(i + 1) + double(j)) / 2.0;
    positives += group_pos;
    i = j;
  }
  const double negatives = double(n) - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives);
}

double LogLossFromLogits(const std::vector<float>& logits, const std::vector<float>& labels) {
  const size_t n = std::min(logits.size(), labels.size());
  if (n == 0) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const double z = logits[i];
    // log(1 + e^z) - y z, written to avoid overflow.
    sum += std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))) - double(labels[i]) * z;
  }
  return sum / double(n);
}

void BinaryMetrics::Add(const float* logits, const float* labels, size_t n) {
  logits_.insert(logits_.end(), logits, logits + n);
  labels_.insert(labels_.end(), labels, labels + n);
}

namespace {
uint64_t ReadStatusKb(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kb = 0;
  const size_t len = std::strlen(field);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      kb = std::strtoull(line + len + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}
}  // namespace

uint64_t PeakRssBytes() { return ReadStatusKb("VmHWM"); }
uint64_t CurrentRssBytes() { return ReadStatusKb("VmRSS"); }

}  // namespace evoscale::trainer
