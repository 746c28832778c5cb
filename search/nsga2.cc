// NSGA2: a steady-state NSGA-II (Deb et al. 2002) for several objectives. Every completed
// trial joins the population at once; when it overflows, the member of the last
// non-dominated front with the smallest crowding distance leaves ((mu + 1) selection, so no
// generation barrier). Dominance is constrained (feasibility first, see fitness.h): feasible
// trials beat infeasible ones, less violation beats more, failed trials are dominated by
// all. Parents come from binary tournaments on (front, crowding distance); children from SBX /
// uniform crossover and per-gene mutation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
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

constexpr double kSbxEta = 15;
constexpr double kMutationStep = 0.08;
constexpr double kUniformShare = 0.05;

class Nsga2Designer final : public EvolutionaryDesigner {
 public:
  Nsga2Designer(const ProblemStatement& problem, int population_size, double mutation_rate,
                double crossover_rate)
      : EvolutionaryDesigner(problem, /*single_objective=*/false, population_size),
        population_size_(population_size),
        mutation_rate_(mutation_rate),
        crossover_rate_(crossover_rate) {}

 private:
  struct Member {
    Genome genome;
    Fitness fitness;
    int64_t order = 0;
    int front = 0;         // 0 = non-dominated
    double crowding = 0;   // larger = lonelier
  };

  bool Ready() const override { return population_.size() >= 2; }

  void Observe(const Genome& genome, const Fitness& fitness, int64_t /*trial_index*/) override {
    population_.push_back({genome, fitness, observed()});
    Rank();
    if (static_cast<int>(population_.size()) <= population_size_) return;
    size_t worst = 0;
    for (size_t i = 1; i < population_.size(); ++i) {
      if (Worse(population_[i], population_[worst])) worst = i;
    }
    population_.erase(population_.begin() + static_cast<std::ptrdiff_t>(worst));
    Rank();
  }

  Genome Propose(SplitMix64& rng, absl::Span<const Genome> /*taken*/,
                 bool* /*spread*/) const override {
    const Member& first = Tournament(rng);
    Genome child = first.genome;
    if (rng.NextUnit() < crossover_rate_) {
      child = Crossover(codec(), first.genome, Tournament(rng).genome, kSbxEta, rng);
    }
    Mutate(codec(), mutation_rate_, kMutationStep, kUniformShare,
           /*at_least_one=*/child == first.genome, rng, child);
    return child;
  }

  // The crowded-comparison order: lower front, then larger crowding distance, then younger.
  static bool Worse(const Member& a, const Member& b) {
    if (a.front != b.front) return a.front > b.front;
    if (a.crowding != b.crowding) return a.crowding < b.crowding;
    return a.order < b.order;
  }

  const Member& Tournament(SplitMix64& rng) const {
    const Member& a = population_[rng.NextBelow(population_.size())];
    const Member& b = population_[rng.NextBelow(population_.size())];
    return Worse(a, b) ? b : a;
  }

  // Fast non-dominated sort and crowding distances: O(n^2 m) for n members, m objectives.
  void Rank() {
    const size_t n = population_.size();
    std::vector<std::vector<size_t>> dominated(n);
    std::vector<int> dominators(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        if (Dominates(population_[i].fitness, population_[j].fitness)) {
          dominated[i].push_back(j);
          ++dominators[j];
        } else if (Dominates(population_[j].fitness, population_[i].fitness)) {
          dominated[j].push_back(i);
          ++dominators[i];
        }
      }
    }
    std::vector<size_t> front;
    for (size_t i = 0; i < n; ++i) {
      if (dominators[i] == 0) front.push_back(i);
    }
    for (int level = 0; !front.empty(); ++level) {
      std::vector<size_t> next;
      for (size_t i : front) {
        population_[i].front = level;
        for (size_t j : dominated[i]) {
          if (--dominators[j] == 0) next.push_back(j);
        }
      }
      Crowding(front);
      front = std::move(next);
    }
  }

  void Crowding(const std::vector<size_t>& front) {
    for (size_t i : front) population_[i].crowding = 0;
    const int objectives = fitness_function().num_objectives();
    std::vector<size_t> order = front;
    for (int k = 0; k < objectives; ++k) {
      auto loss = [&](size_t i) {
        const Fitness& f = population_[i].fitness;
        return f.failed ? std::numeric_limits<double>::infinity() : f.losses[k];
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return loss(a) < loss(b); });
      const double lo = loss(order.front());
      const double hi = loss(order.back());
      population_[order.front()].crowding = std::numeric_limits<double>::infinity();
      population_[order.back()].crowding = std::numeric_limits<double>::infinity();
      if (!(hi > lo) || !std::isfinite(hi - lo)) continue;
      for (size_t r = 1; r + 1 < order.size(); ++r) {
        population_[order[r]].crowding += (loss(order[r + 1]) - loss(order[r - 1])) / (hi - lo);
      }
    }
  }

  // Constant after construction.
  const int population_size_;
  const double mutation_rate_;
  const double crossover_rate_;

  // At most population_size_ members, ranked after every change.
  std::vector<Member> population_;
};

}  // namespace

std::unique_ptr<Designer> NewNsga2Designer(const ProblemStatement& problem) {
  const double genes = std::max<double>(1, static_cast<double>(GenomeCodec(problem.space).size()));
  const auto& s = problem.settings;
  const int population_size = static_cast<int>(SettingOr(s, "population_size", 20));
  const double mutation_rate = SettingOr(s, "mutation_rate", 1 / genes);
  const double crossover_rate = SettingOr(s, "crossover_rate", 0.9);
  return std::make_unique<Nsga2Designer>(problem, population_size, mutation_rate,
                                         crossover_rate);
}

}  // namespace evoscale::search::internal
