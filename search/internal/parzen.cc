#include "search/internal/parzen.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "search/internal/cma.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/sampling.h"

namespace evoscale::search::internal {
namespace {

// Bandwidth bounds on the unit interval.
constexpr double kMinBandwidth = 1e-3;
constexpr double kMaxBandwidth = 0.5;

}  // namespace

Genome MaskInactive(const GenomeCodec& codec, Genome genome) {
  const std::vector<FlatParameter>& flat = codec.flat();
  for (size_t g = 0; g < flat.size() && g < genome.size(); ++g) {
    const int parent = flat[g].parent;
    if (parent < 0) continue;  // parents precede their children (Flatten is depth-first)
    const auto p = static_cast<size_t>(parent);
    // An inactive parent is NaN by now, and so are its children.
    if (std::isnan(genome[p]) ||
        !ConditionHolds(flat[g], ValueAtUnit(flat[p].config, std::clamp(genome[p], 0.0, 1.0)))) {
      genome[g] = std::numeric_limits<double>::quiet_NaN();
    }
  }
  return genome;
}

std::vector<size_t> BestTrials(absl::Span<const Fitness> fitness, std::vector<size_t> candidates,
                               size_t k) {
  k = std::min(k, candidates.size());
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(k),
                    candidates.end(), [&](size_t a, size_t b) {
                      if (Better(fitness[a], fitness[b])) return true;
                      if (Better(fitness[b], fitness[a])) return false;
                      return a > b;  // ties: the newer first
                    });
  candidates.resize(k);
  return candidates;
}

std::vector<size_t> BestAndRecentTrials(absl::Span<const Fitness> fitness,
                                        std::vector<size_t> candidates, size_t limit) {
  if (candidates.size() <= limit) return candidates;
  const size_t best = limit / 2;
  std::vector<size_t> chosen = BestTrials(fitness, candidates, best);
  std::sort(chosen.begin(), chosen.end());
  for (size_t k = candidates.size(); k-- > 0 && chosen.size() < limit;) {
    if (!std::binary_search(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(best),
                            candidates[k])) {
      chosen.push_back(candidates[k]);
    }
  }
  return chosen;
}

void ParzenDensity::Fit(absl::Span<const Genome> genomes, absl::Span<const Fitness> fitness) {
  fitted_ = false;
  const size_t n = std::min(genomes.size(), fitness.size());
  if (n < kMinTrials) return;
  size_t ranked = 0;
  for (size_t i = 0; i < n; ++i) ranked += !fitness[i].failed;
  const size_t good =
      std::min({kMaxGood, static_cast<size_t>(std::ceil(0.1 * static_cast<double>(n))), ranked});
  if (good == 0) return;
  std::vector<size_t> all(n);
  for (size_t i = 0; i < n; ++i) all[i] = i;
  const std::vector<size_t> best = BestTrials(fitness, std::move(all), good);
  const size_t genes = codec_->size();
  size_ = good;
  centres_.clear();
  centres_.reserve(size_ * genes);
  for (size_t i : best) {
    const Genome masked = MaskInactive(*codec_, genomes[i]);
    centres_.insert(centres_.end(), masked.begin(), masked.end());
  }
  // Scott's rule per gene: sigma k^(-1/(d+4)), sigma the spread of the active values.
  size_t free_genes = 0;
  for (size_t g = 0; g < genes; ++g) free_genes += !codec_->fixed(g);
  const double shrink =
      std::pow(static_cast<double>(size_), -1.0 / (static_cast<double>(free_genes) + 4));
  bw_.assign(genes, kMaxBandwidth);
  for (size_t g = 0; g < genes; ++g) {
    double sum = 0, sum_sq = 0;
    size_t count = 0;
    for (size_t i = 0; i < size_; ++i) {
      const double v = centres_[i * genes + g];
      if (std::isnan(v)) continue;
      sum += v;
      sum_sq += v * v;
      ++count;
    }
    double sigma = 0.3;  // about a uniform's spread, for a gene with one value or none
    if (count >= 2) {
      const double mean = sum / static_cast<double>(count);
      sigma = std::sqrt(std::max(0.0, sum_sq / static_cast<double>(count) - mean * mean));
    }
    double bw = std::clamp(sigma * shrink, kMinBandwidth, kMaxBandwidth);
    if (codec_->kind(g) == GeneKind::kOrdinal) {
      bw = std::max(bw, 0.5 / static_cast<double>(codec_->cardinality(g)));
    }
    bw_[g] = bw;
  }
  categorical_eps_ = 1 / (1 + std::sqrt(static_cast<double>(size_)));
  fitted_ = true;
}

Genome ParzenDensity::Sample(SplitMix64& rng) const {
  const size_t genes = codec_->size();
  Genome x(genes);
  for (size_t g = 0; g < genes; ++g) {
    const size_t pick = rng.NextBelow(size_ + 1);
    const double c = pick < size_ ? centres_[pick * genes + g] : std::nan("");
    if (std::isnan(c)) {  // the prior, or a gene the trial did not use
      x[g] = rng.NextUnit();
      continue;
    }
    if (codec_->kind(g) == GeneKind::kCategorical) {
      x[g] = rng.NextUnit() < categorical_eps_ ? rng.NextUnit() : c;
      continue;
    }
    x[g] = ReflectIntoUnit(c + bw_[g] * NextGaussian(rng));
  }
  return x;
}

}  // namespace evoscale::search::internal
