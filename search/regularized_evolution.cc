// REGULARIZED_EVOLUTION: aging evolution (Real, Aggarwal, Huang and Le, "Regularized
// Evolution for Image Classifier Architecture Search", AAAI 2019). The population is the
// population_size most recently completed trials; a child is a mutated copy of the best of
// tournament_size members drawn at random; when a trial completes, the oldest member leaves,
// however good it was. Failed and infeasible trials age out like the others but never win a
// tournament against a ranked member.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "search/designer.h"
#include "search/internal/evolution.h"
#include "search/internal/evolutionary_designers.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {
namespace {

// Mutation: a Gaussian step of this size in genome space, or a uniform redraw.
constexpr double kMutationStep = 0.1;
constexpr double kUniformShare = 0.2;

class RegularizedEvolutionDesigner final : public EvolutionaryDesigner {
 public:
  RegularizedEvolutionDesigner(const ProblemStatement& problem, int population_size,
                               int tournament_size, double mutation_rate)
      : EvolutionaryDesigner(problem, /*single_objective=*/true, population_size),
        population_size_(population_size),
        tournament_size_(tournament_size),
        mutation_rate_(mutation_rate) {}

 private:
  struct Member {
    Genome genome;
    Fitness fitness;
  };

  bool Ready() const override { return population_.size() >= 2; }

  void Observe(const Genome& genome, const Fitness& fitness, int64_t /*trial_index*/) override {
    population_.push_back({genome, fitness});
    if (static_cast<int>(population_.size()) > population_size_) population_.pop_front();
  }

  Genome Propose(SplitMix64& rng, absl::Span<const Genome> /*taken*/,
                 bool* /*spread*/) const override {
    // Ties go to the younger member (later in the deque).
    size_t winner = rng.NextBelow(population_.size());
    for (int k = 1; k < tournament_size_; ++k) {
      const size_t contender = rng.NextBelow(population_.size());
      if (Better(population_[contender].fitness, population_[winner].fitness) ||
          (!Better(population_[winner].fitness, population_[contender].fitness) &&
           contender > winner)) {
        winner = contender;
      }
    }
    Genome child = population_[winner].genome;
    Mutate(codec(), mutation_rate_, kMutationStep, kUniformShare, /*at_least_one=*/true, rng,
           child);
    return child;
  }

  // Constant after construction.
  const int population_size_;
  const int tournament_size_;
  const double mutation_rate_;

  // The population_size_ latest completed trials, oldest first.
  std::deque<Member> population_;
};

}  // namespace

std::unique_ptr<Designer> NewRegularizedEvolutionDesigner(const ProblemStatement& problem) {
  const double genes = std::max<double>(1, static_cast<double>(GenomeCodec(problem.space).size()));
  const auto& s = problem.settings;
  const int population_size =
      static_cast<int>(SettingOr(s, "population_size", std::clamp(2 * genes, 10.0, 50.0)));
  const int tournament_size = static_cast<int>(
      SettingOr(s, "tournament_size", std::max(2, population_size / 4)));
  const double mutation_rate = SettingOr(s, "mutation_rate", 1 / genes);
  return std::make_unique<RegularizedEvolutionDesigner>(problem, population_size,
                                                        tournament_size, mutation_rate);
}

}  // namespace evoscale::search::internal
