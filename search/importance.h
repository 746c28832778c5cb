// Parameter importance: how much of an objective's variance over completed trials each
// parameter explains on its own (a first-order, fANOVA-style main effect), for the dashboard
// and clients deciding which parameters to keep searching.
#ifndef EVOSCALE_SEARCH_IMPORTANCE_H_
#define EVOSCALE_SEARCH_IMPORTANCE_H_

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search {

struct ParameterImportance {
  std::string name;
  // The share of the objective's variance this parameter's main effect explains, corrected
  // for what grouping explains by chance (epsilon squared): 0 (none) to 1 (all).
  double explained_variance = 0;
  // explained_variance scaled so that the parameters' importances sum to 1 (all 0 when none
  // explains anything), as Optuna reports importances.
  double importance = 0;
  int trials = 0;  // the completed trials in which the parameter is active
};

// The importance of every parameter of `space` (conditional children included, over the
// trials where they are active), for `metric` of the SUCCEEDED trials' final measurements
// (trials without it, or with a non-finite value, are left out); most important first, ties
// by name. Trials are grouped by the parameter's value: a categorical or a parameter with at
// most 10 distinct values by value, others into about sqrt(n) (2 to 10) quantile bins. A
// parameter active in fewer than 4 trials, or with fewer groups than 2, explains nothing.
// O(p n log n) for p parameters and n trials.
std::vector<ParameterImportance> MainEffectImportance(const SearchSpace& space,
                                                      absl::Span<const Trial> trials,
                                                      const std::string& metric);

}  // namespace evoscale::search

#endif  // EVOSCALE_SEARCH_IMPORTANCE_H_
