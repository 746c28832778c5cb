// Factories for the stateless designers of random_designers.cc: RANDOM, QUASI_RANDOM, GRID.
// Each suggestion depends only on (problem, trial_index + j), never on history, so a fresh
// designer suggests exactly what a live one would.
#ifndef EVOSCALE_SEARCH_INTERNAL_RANDOM_DESIGNERS_H_
#define EVOSCALE_SEARCH_INTERNAL_RANDOM_DESIGNERS_H_

#include <cstdint>
#include <memory>

#include "search/designer.h"
#include "search/types.h"

namespace evoscale::search::internal {

// Independent uniform samples (in each parameter's scaled space); suggestion j of a call
// draws from a generator seeded with a mix of `seed` and trial_index + j.
std::unique_ptr<Designer> NewRandomDesigner(const SearchSpace& space, uint64_t seed);

// A Halton sequence with per-dimension digit scrambling and a Cranley-Patterson shift, both
// derived from `seed`; suggestion j of a call is point trial_index + j (after a few skipped
// leading points).
std::unique_ptr<Designer> NewQuasiRandomDesigner(const SearchSpace& space, uint64_t seed);

// The full grid (see GridAxis in sampling.h) in mixed-radix order, the first parameter
// varying fastest; suggestion j of a call is grid point trial_index + j. Past the last point
// it suggests fewer (possibly none). `grid_points` in [2, 1000].
std::unique_ptr<Designer> NewGridDesigner(const SearchSpace& space, int grid_points);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_RANDOM_DESIGNERS_H_
