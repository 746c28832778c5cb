#include "search/internal/genome.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "absl/types/span.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

constexpr double kMiddle = 0.5;

// The inverse of ScaleUnit in sampling.cc (same fallback to linear for an invalid log
// range), clamped into [0, 1].
double UnitOf(ScaleType scale, double lo, double hi, double value) {
  if (!(hi > lo)) return kMiddle;
  double u;
  if (scale == ScaleType::kLinear || lo <= 0) {
    u = (value - lo) / (hi - lo);
  } else {
    const double log_lo = std::log(lo);
    const double log_range = std::log(hi) - log_lo;
    if (scale == ScaleType::kLog) {
      u = (std::log(std::max(value, lo)) - log_lo) / log_range;
    } else {
      // value = hi + lo - exp(log_lo + (1 - u) * log_range)
      const double mirrored = std::max(hi + lo - value, lo);
      u = 1 - (std::log(mirrored) - log_lo) / log_range;
    }
  }
  if (!(u > 0)) return 0;  // NaN too
  return std::min(u, 1.0);
}

double AsNumber(const ParameterValue& value, bool* ok) {
  *ok = true;
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<int64_t>(&value)) return static_cast<double>(*i);
  *ok = false;
  return 0;
}

uint64_t HashBytes(uint64_t h, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) h = (h ^ bytes[i]) * 0x100000001b3ULL;  // FNV-1a
  return h;
}

}  // namespace

GenomeCodec::GenomeCodec(const SearchSpace& space) : flat_(Flatten(space)) {
  for (const FlatParameter& parameter : flat_) {
    const ParameterConfig& c = parameter.config;
    int64_t n = 0;
    GeneKind kind = GeneKind::kContinuous;
    switch (c.type) {
      case ParameterType::kDouble:
        break;
      case ParameterType::kInteger:
        kind = GeneKind::kOrdinal;
        n = static_cast<int64_t>(std::min(c.max - c.min + 1, 2147483648.0));
        break;
      case ParameterType::kDiscrete:
        kind = GeneKind::kOrdinal;
        n = static_cast<int64_t>(c.discrete_values.size());
        break;
      case ParameterType::kCategorical:
        kind = GeneKind::kCategorical;
        n = static_cast<int64_t>(c.categories.size());
        break;
    }
    kinds_.push_back(kind);
    cardinality_.push_back(n);
    fixed_double_.push_back(c.type == ParameterType::kDouble && !(c.max > c.min));
  }
}

Genome GenomeCodec::Encode(const ParameterDict& params) const {
  Genome genome(flat_.size(), kMiddle);
  for (size_t g = 0; g < flat_.size(); ++g) {
    const ParameterConfig& c = flat_[g].config;
    const auto it = params.find(c.name);
    if (it == params.end()) continue;
    bool numeric = false;
    const double number = AsNumber(it->second, &numeric);
    switch (c.type) {
      case ParameterType::kDouble:
        if (numeric) genome[g] = UnitOf(c.scale, c.min, c.max, std::clamp(number, c.min, c.max));
        break;
      case ParameterType::kInteger:
        if (numeric) {
          genome[g] = UnitOf(c.scale, c.min - 0.5, c.max + 0.5,
                             std::clamp(std::round(number), c.min, c.max));
        }
        break;
      case ParameterType::kDiscrete: {
        if (!numeric || c.discrete_values.empty()) break;
        const auto& v = c.discrete_values;
        size_t best = 0;
        for (size_t i = 1; i < v.size(); ++i) {
          if (std::abs(v[i] - number) < std::abs(v[best] - number)) best = i;
        }
        genome[g] = CellCentre(best, v.size());
        break;
      }
      case ParameterType::kCategorical: {
        const auto* category = std::get_if<std::string>(&it->second);
        if (category == nullptr) break;
        const auto found = std::find(c.categories.begin(), c.categories.end(), *category);
        if (found != c.categories.end()) {
          genome[g] = CellCentre(static_cast<size_t>(found - c.categories.begin()),
                                 c.categories.size());
        }
        break;
      }
    }
  }
  return genome;
}

ParameterDict GenomeCodec::Decode(absl::Span<const double> genome) const {
  std::vector<ParameterValue> values;
  values.reserve(flat_.size());
  for (size_t g = 0; g < flat_.size(); ++g) {
    values.push_back(ValueAtUnit(flat_[g].config, g < genome.size() ? genome[g] : kMiddle));
  }
  return AssembleActive(flat_, values);
}

uint64_t Fingerprint(const ParameterDict& params) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& [name, value] : params) {
    const uint64_t size = name.size();
    h = HashBytes(h, &size, sizeof(size));
    h = HashBytes(h, name.data(), name.size());
    const auto type = static_cast<unsigned char>(value.index());
    h = HashBytes(h, &type, 1);
    if (const auto* d = std::get_if<double>(&value)) {
      const double normalised = *d == 0 ? 0.0 : *d;  // -0.0 == 0.0
      h = HashBytes(h, &normalised, sizeof(normalised));
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      h = HashBytes(h, i, sizeof(*i));
    } else {
      const std::string& s = std::get<std::string>(value);
      const uint64_t length = s.size();
      h = HashBytes(h, &length, sizeof(length));
      h = HashBytes(h, s.data(), s.size());
    }
  }
  return Mix64(h);
}

double ReflectIntoUnit(double x) {
  if (!std::isfinite(x)) return kMiddle;
  if (x >= 0 && x <= 1) return x;
  // Period 2: [0, 1] forwards, [1, 2] backwards.
  double t = std::fmod(std::abs(x), 2.0);
  if (t > 1) t = 2 - t;
  return t;
}

size_t CellOf(double gene, int64_t cells) {
  const auto k = static_cast<size_t>(cells);
  return std::min(static_cast<size_t>(std::max(gene, 0.0) * static_cast<double>(k)), k - 1);
}

double CellCentre(size_t index, size_t cells) {
  return (static_cast<double>(index) + 0.5) / static_cast<double>(cells);
}

}  // namespace evoscale::search::internal
