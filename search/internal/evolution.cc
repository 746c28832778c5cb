#include "search/internal/evolution.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "search/internal/cma.h"
#include "search/internal/evolutionary_designers.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

// Salts the per-suggestion streams so they differ from RANDOM's for the same seed.
constexpr uint64_t kStreamSalt = 0x5eed0f6e6e7e71c5ULL;

double SquaredDistance(const Genome& a, const Genome& b) {
  double sum = 0;
  for (size_t g = 0; g < a.size() && g < b.size(); ++g) sum += (a[g] - b[g]) * (a[g] - b[g]);
  return sum;
}

}  // namespace

double SettingOr(const std::map<std::string, std::string>& settings, const std::string& key,
                 double fallback) {
  const auto it = settings.find(key);
  double value = 0;
  if (it == settings.end() || !absl::SimpleAtod(it->second, &value) || !std::isfinite(value)) {
    return fallback;
  }
  return value;
}

EvolutionaryDesigner::EvolutionaryDesigner(const ProblemStatement& problem,
                                           bool single_objective, int initial_population)
    : codec_(problem.space),
      fitness_(problem.metrics, single_objective),
      halton_(static_cast<int>(codec_.size()), problem.seed),
      seed_(problem.seed),
      initial_population_(initial_population) {}

void EvolutionaryDesigner::Update(absl::Span<const Trial> newly_completed,
                                  absl::Span<const Trial> pending) {
  for (const Trial& trial : newly_completed) {
    tried_.insert(Fingerprint(trial.parameters));
    ++observed_;
    const Genome genome = codec_.Encode(trial.parameters);
    Observe(genome, fitness_.Evaluate(trial), trial.id - 1);
    ObserveTrial(genome, trial);
  }
  ObservePending(pending);
  pending_keys_.clear();
  pending_genomes_.clear();
  for (const Trial& trial : pending) {
    pending_keys_.insert(Fingerprint(trial.parameters));
    pending_genomes_.push_back(codec_.Encode(trial.parameters));
  }
  AfterUpdate();
}

SplitMix64 EvolutionaryDesigner::SuggestionStream(int64_t trial_index) const {
  return SplitMix64(StreamSeed(seed_ ^ kStreamSalt, static_cast<uint64_t>(trial_index)));
}

Genome EvolutionaryDesigner::RandomGenome(SplitMix64& rng) const {
  Genome genome(codec_.size());
  for (double& gene : genome) gene = rng.NextUnit();
  return genome;
}

absl::StatusOr<std::vector<ParameterDict>> EvolutionaryDesigner::Suggest(int count,
                                                                         int64_t trial_index) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("count must be >= 0, got ", count));
  if (trial_index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("trial_index must be >= 0, got ", trial_index));
  }
  std::vector<ParameterDict> suggestions;
  suggestions.reserve(count);
  // The pending trials, then this call's suggestions as they are chosen: new candidates
  // spread away from all of them.
  std::vector<Genome> taken = pending_genomes_;
  absl::flat_hash_set<uint64_t> batch_keys;
  auto known = [&](uint64_t key) {
    return tried_.contains(key) || pending_keys_.contains(key) || batch_keys.contains(key);
  };
  auto nearest_pending = [&](const Genome& genome) {
    double nearest = std::numeric_limits<double>::infinity();
    for (const Genome& other : taken) nearest = std::min(nearest, SquaredDistance(genome, other));
    return std::sqrt(nearest);
  };

  const bool ready = Ready();
  const double radius = ready ? SpreadRadius() : 0;
  for (int j = 0; j < count; ++j) {
    const uint64_t index = static_cast<uint64_t>(trial_index) + static_cast<uint64_t>(j);
    SplitMix64 rng = SuggestionStream(static_cast<int64_t>(index));
    Genome chosen;
    ParameterDict dict;
    uint64_t key = 0;
    if (!ready || index < static_cast<uint64_t>(initial_population_)) {
      chosen = Initial(halton_.Point(index), rng);
      dict = codec_.Decode(chosen);
      key = Fingerprint(dict);
      // Only small discrete spaces repeat themselves; fall back to uniform draws there.
      for (int attempt = 0; attempt < kAttempts && known(key); ++attempt) {
        chosen = RandomGenome(rng);
        dict = codec_.Decode(chosen);
        key = Fingerprint(dict);
      }
    } else {
      // The first novel candidate far enough from every pending point; failing that, the
      // novel one farthest from them; failing that (a nearly exhausted space), a uniform
      // draw, even a duplicate.
      bool found = false;
      double best_distance = -1;
      for (int attempt = 0; attempt < kAttempts && !found; ++attempt) {
        bool spread = false;
        Genome candidate = Propose(rng, taken, &spread);
        for (double& gene : candidate) gene = std::clamp(gene, 0.0, 1.0);
        ParameterDict candidate_dict = codec_.Decode(candidate);
        const uint64_t candidate_key = Fingerprint(candidate_dict);
        if (known(candidate_key)) continue;
        // A candidate that keeps its own distance from the pending points counts as far.
        double distance = 0;
        if (spread) {
          distance = std::numeric_limits<double>::infinity();
        } else if (radius > 0) {
          distance = nearest_pending(candidate);
        }
        if (distance > best_distance) {
          best_distance = distance;
          found = distance >= radius;
          chosen = std::move(candidate);
          dict = std::move(candidate_dict);
          key = candidate_key;
        }
      }
      for (int attempt = 0; attempt < kAttempts && best_distance < 0; ++attempt) {
        chosen = RandomGenome(rng);
        dict = codec_.Decode(chosen);
        key = Fingerprint(dict);
        if (!known(key)) best_distance = 0;
      }
    }
    batch_keys.insert(key);
    taken.push_back(std::move(chosen));
    suggestions.push_back(std::move(dict));
  }
  return suggestions;
}

Genome Crossover(const GenomeCodec& codec, const Genome& a, const Genome& b, double eta,
                 SplitMix64& rng) {
  Genome child = a;
  for (size_t g = 0; g < codec.size(); ++g) {
    if (codec.fixed(g) || rng.NextUnit() >= 0.5) continue;
    if (codec.kind(g) == GeneKind::kCategorical) {
      child[g] = b[g];
      continue;
    }
    const double x1 = a[g];
    const double x2 = b[g];
    if (std::abs(x1 - x2) < 1e-14) continue;
    const double u = rng.NextUnit();
    const double beta = u <= 0.5 ? std::pow(2 * u, 1 / (eta + 1))
                                 : std::pow(1 / (2 * (1 - u)), 1 / (eta + 1));
    // One of the two SBX children, centred on the midpoint; the spread follows the parents'.
    const double sign = rng.NextUnit() < 0.5 ? 1.0 : -1.0;
    child[g] = ReflectIntoUnit(0.5 * ((x1 + x2) + sign * beta * (x1 - x2)));
  }
  return child;
}

void MutateGene(const GenomeCodec& codec, size_t g, double scale, double uniform_share,
                SplitMix64& rng, Genome& genome) {
  if (codec.fixed(g)) return;
  if (codec.kind(g) == GeneKind::kCategorical) {
    const auto n = static_cast<uint64_t>(codec.cardinality(g));
    const uint64_t current = CellOf(genome[g], codec.cardinality(g));
    const uint64_t next = (current + 1 + rng.NextBelow(n - 1)) % n;
    genome[g] = CellCentre(next, n);
    return;
  }
  if (rng.NextUnit() < uniform_share) {
    genome[g] = rng.NextUnit();
    return;
  }
  double step = scale;
  if (codec.kind(g) == GeneKind::kOrdinal) {
    step = std::max(step, 1.0 / static_cast<double>(codec.cardinality(g)));
  }
  genome[g] = ReflectIntoUnit(genome[g] + step * NextGaussian(rng));
}

int Mutate(const GenomeCodec& codec, double rate, double scale, double uniform_share,
           bool at_least_one, SplitMix64& rng, Genome& genome) {
  int mutated = 0;
  for (size_t g = 0; g < codec.size(); ++g) {
    if (codec.fixed(g) || rng.NextUnit() >= rate) continue;
    MutateGene(codec, g, scale, uniform_share, rng, genome);
    ++mutated;
  }
  if (mutated == 0 && at_least_one) {
    std::vector<size_t> free_genes;
    for (size_t g = 0; g < codec.size(); ++g) {
      if (!codec.fixed(g)) free_genes.push_back(g);
    }
    if (!free_genes.empty()) {
      MutateGene(codec, free_genes[rng.NextBelow(free_genes.size())], scale, uniform_share, rng,
                 genome);
      ++mutated;
    }
  }
  return mutated;
}

}  // namespace evoscale::search::internal
