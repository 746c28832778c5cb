// The GENETIC designer's TPE-style move: a Parzen density l(x) over the genomes of the best
// completed trials (at most 25, about a tenth of them), as TPE uses (Bergstra et al. 2011):
// per gene, a mixture of one kernel per good trial plus a uniform prior component, the genes
// drawn independently (TPE's default, so a draw recombines good trials gene by gene). The
// designer draws candidates from it and lets its surrogate (gp.h) choose among them.
//
// Kernels work on the genome natively: a Gaussian on a continuous or ordinal gene (its
// bandwidth Scott's rule on that gene's spread among the good trials, at least half a cell
// for an ordinal gene), an Aitchison-Aitken kernel on a categorical gene (the trial's
// category keeps most of the weight, the rest is spread evenly), and a gene that is inactive
// in the trial (a conditional parameter of another branch) is drawn uniformly.
//
// Cost: Fit O(n + k d) for n trials, k good ones, d genes; Sample O(d). Constant between
// fits, so safe to read from several threads.
#ifndef EVOSCALE_SEARCH_INTERNAL_PARZEN_H_
#define EVOSCALE_SEARCH_INTERNAL_PARZEN_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"
#include "search/internal/fitness.h"
#include "search/internal/genome.h"
#include "search/internal/sampling.h"

namespace evoscale::search::internal {

// `genome` with its inactive genes set to NaN (active: top-level genes, and children whose
// parent is active and takes a value their condition lists): how the surrogates store trials
// and candidates, so that a gene only one side uses counts for nothing.
Genome MaskInactive(const GenomeCodec& codec, Genome genome);

// The indices among `candidates` of the `k` best trials by `fitness`, best first (ties: the
// later trial first; failed trials last).
std::vector<size_t> BestTrials(absl::Span<const Fitness> fitness, std::vector<size_t> candidates,
                               size_t k);

// What the Gaussian processes fit on: all of `candidates` (trial indices, ascending) when
// there are at most `limit`, else the best limit / 2 by `fitness` (ascending) followed by the
// most recent of the others (newest first) up to `limit` in all.
std::vector<size_t> BestAndRecentTrials(absl::Span<const Fitness> fitness,
                                        std::vector<size_t> candidates, size_t limit);

class ParzenDensity {
 public:
  // Fits on at least this many trials, with at most kMaxGood of them in the density.
  static constexpr size_t kMinTrials = 8;
  static constexpr size_t kMaxGood = 25;

  // `codec` must outlive the density.
  explicit ParzenDensity(const GenomeCodec& codec) : codec_(&codec) {}

  // Refits on the best of the trials (`genomes[i]` scored `fitness[i]`; failed ones are
  // never among them). Fewer than kMinTrials, or no ranked trial, leaves it unfitted.
  void Fit(absl::Span<const Genome> genomes, absl::Span<const Fitness> fitness);
  bool fitted() const { return fitted_; }

  // A draw from l(x): each gene from an independently picked good trial's kernel (or, with
  // weight 1/(k+1), uniform). Requires fitted().
  Genome Sample(SplitMix64& rng) const;

 private:
  const GenomeCodec* codec_;
  bool fitted_ = false;
  size_t size_ = 0;             // good trials in the density
  std::vector<double> centres_; // size x genes, row-major; NaN = inactive gene
  std::vector<double> bw_;      // per gene: the bandwidth (numeric genes)
  double categorical_eps_ = 0;  // chance a categorical gene leaves the trial's category
};

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_PARZEN_H_
