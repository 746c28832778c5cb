// Shared machinery of the evolutionary designers (GENETIC, REGULARIZED_EVOLUTION, NSGA2):
// the genome codec, the quasi-random initial population, duplicate avoidance against every
// tried and pending point, spreading parallel suggestions apart, and the determinism rules.
//
// Determinism: the state of a designer is a function of the completed trials in completion
// order only. Update() folds them in one at a time through Observe(), so batching does not
// matter, and a fresh designer fed every completed trial in one call reaches the same state
// as a live one fed them incrementally (AfterUpdate, run once per Update, must keep that:
// what it computes must depend on the trials so far, not on how they were batched). Suggest() never changes that state, and draws
// suggestion j of a call from a generator seeded with (seed, trial_index + j).
//
// Cost: Update is O(1) amortised per trial plus what Observe and AfterUpdate cost; Suggest
// is independent of the number of completed trials (a hash lookup for duplicates, a scan of
// the pending trials for spreading), plus what Propose costs.
#ifndef EVOSCALE_SEARCH_INTERNAL_EVOLUTION_H_
#define EVOSCALE_SEARCH_INTERNAL_EVOLUTION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "search/designer.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {

class EvolutionaryDesigner : public Designer {
 public:
  // `initial_population`: the first that many trials of a study (by trial index) are
  // quasi-random points, and so is every suggestion until Ready().
  EvolutionaryDesigner(const ProblemStatement& problem, bool single_objective,
                       int initial_population);

  void Update(absl::Span<const Trial> newly_completed, absl::Span<const Trial> pending) final;
  absl::StatusOr<std::vector<ParameterDict>> Suggest(int count, int64_t trial_index) final;

 protected:
  // One completed trial, in completion order; `trial_index` is its id - 1, the index its
  // suggestion was made for when this designer made it.
  virtual void Observe(const Genome& genome, const Fitness& fitness, int64_t trial_index) = 0;
  // The same completed trial as the Observe call just before, whole (its measurements, its
  // cores), for designers that weigh what trials cost.
  virtual void ObserveTrial(const Genome& /*genome*/, const Trial& /*trial*/) {}
  // The pending trials of every Update, after the Observe calls.
  virtual void ObservePending(absl::Span<const Trial> /*pending*/) {}
  // Called at the end of every Update, after the Observe calls.
  virtual void AfterUpdate() {}
  // True once the designer has enough history to breed.
  virtual bool Ready() const = 0;
  // One candidate genome (genes in [0, 1]). Called up to kAttempts times per suggestion
  // with the same `rng` when a candidate duplicates a known point or lands too close to a
  // pending one; must not change the designer's state. `taken`: the pending trials' genomes,
  // then this call's earlier suggestions. A designer whose candidate already keeps its
  // distance from them (a model that knows they are pending) sets `*spread` (false on entry):
  // SpreadRadius() is then not applied to it.
  virtual Genome Propose(SplitMix64& rng, absl::Span<const Genome> taken, bool* spread) const = 0;
  // The initial-population suggestion made from `halton`, that index's quasi-random point
  // (`rng` is the suggestion's stream); a designer that weighs costs may pick a cheaper
  // point. Must not change the designer's state.
  virtual Genome Initial(Genome halton, SplitMix64& /*rng*/) const { return halton; }
  // Pending points closer than this (Euclidean, genome space) to a candidate push it to be
  // redrawn; 0 turns spreading off.
  virtual double SpreadRadius() const { return 0; }

  const GenomeCodec& codec() const { return codec_; }
  const FitnessFunction& fitness_function() const { return fitness_; }
  int64_t observed() const { return observed_; }
  // A uniformly random genome.
  Genome RandomGenome(SplitMix64& rng) const;
  // The generator Suggest hands to Propose for the suggestion of `trial_index` (so a
  // designer can tell, once the trial completes, what its first draw was).
  SplitMix64 SuggestionStream(int64_t trial_index) const;

 private:
  static constexpr int kAttempts = 12;

  // Constant after construction.
  const GenomeCodec codec_;
  const FitnessFunction fitness_;
  const HaltonSequence halton_;
  const uint64_t seed_;
  const int initial_population_;

  // Rebuilt by every Update from the completed trials.
  int64_t observed_ = 0;                           // completed trials seen
  absl::flat_hash_set<uint64_t> tried_;            // fingerprints of completed trials
  // Replaced by every Update.
  absl::flat_hash_set<uint64_t> pending_keys_;     // fingerprints of pending trials
  std::vector<Genome> pending_genomes_;
};

// --- Variation operators on genomes (all keep genes in [0, 1] and leave fixed genes alone) --

// Crossover of two parents: simulated binary crossover (SBX, distribution index `eta`) on
// each continuous and ordinal gene with probability 1/2, uniform crossover on categorical
// genes.
Genome Crossover(const GenomeCodec& codec, const Genome& a, const Genome& b, double eta,
                 SplitMix64& rng);

// Mutates gene `g`: a categorical gene moves to another category; a number takes a Gaussian
// step of standard deviation `scale` (at least one cell for ordinal genes), reflected at the
// bounds, or with probability `uniform_share` a uniform draw. No-op on a fixed gene.
void MutateGene(const GenomeCodec& codec, size_t g, double scale, double uniform_share,
                SplitMix64& rng, Genome& genome);

// Mutates each non-fixed gene with probability `rate`, and one at random when none was
// picked and `at_least_one` holds. Returns how many genes were mutated.
int Mutate(const GenomeCodec& codec, double rate, double scale, double uniform_share,
           bool at_least_one, SplitMix64& rng, Genome& genome);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_EVOLUTION_H_
