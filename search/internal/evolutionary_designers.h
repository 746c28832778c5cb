// Factories for the evolutionary designers. `problem` must be valid and its settings must
// have passed ValidateAlgorithmSettings for its algorithm (unparsable values fall back to the
// defaults). See evolution.h for the determinism and cost rules they all follow.
#ifndef EVOSCALE_SEARCH_INTERNAL_EVOLUTIONARY_DESIGNERS_H_
#define EVOSCALE_SEARCH_INTERNAL_EVOLUTIONARY_DESIGNERS_H_

#include <map>
#include <memory>
#include <string>

#include "search/designer.h"
#include "search/types.h"

namespace evoscale::search::internal {

// GENETIC (genetic.cc): an asynchronous steady-state GA with a memetic CMA-ES step, a
// Gaussian-process surrogate screening candidates, a learned model of the objective whose
// expected improvement the GA maximises, and adaptive operator choice.
// Settings: population_size, mutation_rate, crossover_rate, tournament_size,
// local_search_rate, initial_step, candidates, min_move_share, reward_decay, model_share,
// model_candidates.
std::unique_ptr<Designer> NewGeneticDesigner(const ProblemStatement& problem);

// REGULARIZED_EVOLUTION (regularized_evolution.cc): aging evolution, Real et al. 2019.
// Settings: population_size, tournament_size, mutation_rate.
std::unique_ptr<Designer> NewRegularizedEvolutionDesigner(const ProblemStatement& problem);

// NSGA2 (nsga2.cc): steady-state NSGA-II with constrained dominance.
// Settings: population_size, mutation_rate, crossover_rate.
std::unique_ptr<Designer> NewNsga2Designer(const ProblemStatement& problem);

// The value of `settings[key]` parsed as a number, or `fallback` when absent or unparsable.
double SettingOr(const std::map<std::string, std::string>& settings, const std::string& key,
                 double fallback);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_EVOLUTIONARY_DESIGNERS_H_
