// The designers by algorithm: checks an algorithm's settings and makes its Designer.
#ifndef EVOSCALE_SEARCH_DESIGNERS_H_
#define EVOSCALE_SEARCH_DESIGNERS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "search/designer.h"
#include "search/types.h"

namespace evoscale::search {

// Checks `settings` for `algorithm`: unknown keys and bad values are INVALID_ARGUMENT with a
// message naming the key, e.g. `settings["population_size"]: must be an integer >= 2, got "x"`.
absl::Status ValidateAlgorithmSettings(Algorithm algorithm,
                                       const std::map<std::string, std::string>& settings);

// Makes the designer for `problem.algorithm`. The problem must be valid (service/ validates
// it). GENETIC, REGULARIZED_EVOLUTION and NSGA2 keep state rebuilt from the completed trials
// (search/internal/evolution.h); RANDOM, QUASI_RANDOM and GRID are stateless.
absl::StatusOr<std::unique_ptr<Designer>> CreateDesigner(const ProblemStatement& problem);

}  // namespace evoscale::search

#endif  // EVOSCALE_SEARCH_DESIGNERS_H_
