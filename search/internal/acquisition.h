// Maximising the GP's acquisition (log expected improvement, gp_model.h) over genomes: the GA
// proposes, the acquisition selects, a local search finishes. The caller hands in candidates
// (its moves' offspring: CMA-ES draws, crossover children, mutants, Parzen draws, uniform
// points); every one is scored, and the best few are refined: gradient ascent on the
// numeric genes (projected onto [0, 1], steps scaled by each gene's length scale), then
// one-gene neighbours on the discrete genes (every other category of a categorical gene, the
// next cell either way of an ordinal one), until nothing improves.
//
// Cost: one acquisition evaluation (O(n d + n^2) for a model of n points, d genes) per
// candidate, plus at most kGradientSteps gradient evaluations and the discrete neighbours'
// evaluations per refined candidate.
#ifndef EVOSCALE_SEARCH_INTERNAL_ACQUISITION_H_
#define EVOSCALE_SEARCH_INTERNAL_ACQUISITION_H_

#include <vector>

#include "search/internal/genome.h"
#include "search/internal/gp_model.h"

namespace evoscale::search::internal {

struct AcquisitionOptimum {
  Genome genome;
  double value = 0;  // log EI there
};

// The genome of highest log EI below `best` found from `candidates` (at least one), refining
// the `refine` best of them. Requires model.conditioned().
AcquisitionOptimum MaximiseAcquisition(const GpModel& model, const GenomeCodec& codec,
                                       double best, std::vector<Genome> candidates, int refine);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_ACQUISITION_H_
