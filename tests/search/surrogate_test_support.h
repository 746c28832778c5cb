// What the search tests of surrogates and samplers share: a small conditional space, the
// genes of its categorical parameter, and a one-objective fitness.
#ifndef EVOSCALE_TESTS_SEARCH_SURROGATE_TEST_SUPPORT_H_
#define EVOSCALE_TESTS_SEARCH_SURROGATE_TEST_SUPPORT_H_

#include <initializer_list>
#include <string>

#include "search/internal/fitness.h"
#include "search/types.h"

namespace evoscale::search::internal::testing {

// Doubles in [0, 1] named `doubles`, then opt in {sgd, adam} with momentum in [0, 1] under sgd
// only. Genes: the doubles, opt (sgd = kSgd, adam = kAdam), momentum.
inline SearchSpace DoublesAndOptimizer(std::initializer_list<const char*> doubles) {
  SearchSpace space;
  for (const char* name : doubles) {
    space.parameters.push_back({.name = name, .type = ParameterType::kDouble, .min = 0, .max = 1});
  }
  ParameterConfig opt{.name = "opt", .type = ParameterType::kCategorical};
  opt.categories = {"sgd", "adam"};
  ConditionalChild child;
  child.parent_categories = {"sgd"};
  child.parameters.push_back({.name = "momentum", .type = ParameterType::kDouble, .min = 0, .max = 1});
  opt.children.push_back(child);
  space.parameters.push_back(opt);
  return space;
}
inline constexpr double kSgd = 0.25, kAdam = 0.75;

// A succeeded trial's fitness with one objective.
inline Fitness Loss(double loss) { return {.failed = false, .violation = 0, .losses = {loss}}; }

}  // namespace evoscale::search::internal::testing

#endif  // EVOSCALE_TESTS_SEARCH_SURROGATE_TEST_SUPPORT_H_
