// The Designer interface: proposes parameter assignments for new trials. search/designers.h
// makes the designer of each algorithm.
#ifndef EVOSCALE_SEARCH_DESIGNER_H_
#define EVOSCALE_SEARCH_DESIGNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "search/types.h"

namespace evoscale::search {

// A Designer suggests parameters. It keeps no state that cannot be rebuilt: a fresh designer
// for the same ProblemStatement, fed the same completed trials in the same order through
// Update(), suggests exactly what the live one would have (determinism across restarts).
//
// Not thread-safe: the caller serialises calls (the service holds the study's lock).
class Designer {
 public:
  virtual ~Designer() = default;

  // Feeds trials that reached a final state (succeeded, infeasible, failed) since the last
  // call, in completion order, plus every trial that is still pending (suggested and not
  // finished) so that new suggestions can spread away from them.
  virtual void Update(absl::Span<const Trial> newly_completed,
                      absl::Span<const Trial> pending) = 0;

  // Suggests up to `count` new assignments (fewer when the space is exhausted, as GRID can
  // be). `trial_index` is the number of trials the study already holds; stateless designers
  // derive their random stream from (seed, trial_index) so restarts change nothing.
  virtual absl::StatusOr<std::vector<ParameterDict>> Suggest(int count,
                                                             int64_t trial_index) = 0;
};

}  // namespace evoscale::search

#endif  // EVOSCALE_SEARCH_DESIGNER_H_
