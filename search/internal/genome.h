// The genome of the evolutionary designers: one gene per parameter of the flattened search
// space (see Flatten in sampling.h), each a coordinate in the unit interval of the
// parameter's scaled space. Doubles map through their scale; integers through their scale
// widened by half a step on each side (so every integer owns an equal cell on a linear
// scale); discrete values and categories own the cell [i/n, (i+1)/n). Decoding rounds, so
// operators can work on real numbers throughout; inactive conditional genes are carried
// along and simply not decoded.
#ifndef EVOSCALE_SEARCH_INTERNAL_GENOME_H_
#define EVOSCALE_SEARCH_INTERNAL_GENOME_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "search/internal/sampling.h"
#include "search/types.h"

namespace evoscale::search::internal {

// How operators may treat a gene.
enum class GeneKind {
  kContinuous,   // kDouble: any point of [0, 1]
  kOrdinal,      // kInteger, kDiscrete: ordered cells; numeric operators, decoding rounds
  kCategorical,  // unordered cells: uniform crossover, mutation picks another category
};

using Genome = std::vector<double>;

// Converts between parameter dicts and genomes for one search space. Constant after
// construction, so it is safe to share between threads.
class GenomeCodec {
 public:
  explicit GenomeCodec(const SearchSpace& space);

  size_t size() const { return flat_.size(); }
  const std::vector<FlatParameter>& flat() const { return flat_; }
  GeneKind kind(size_t gene) const { return kinds_[gene]; }
  // Number of values of an ordinal or categorical gene (saturated at 2^31); 0 for continuous.
  int64_t cardinality(size_t gene) const { return cardinality_[gene]; }
  // Genes with exactly one possible value (a single category, min == max, ...): operators
  // leave them alone.
  bool fixed(size_t gene) const { return cardinality_[gene] == 1 || fixed_double_[gene]; }

  // The genome of `params`. Values outside the space are clamped (numbers) or snapped to the
  // nearest listed value (discrete); an unknown category, and every parameter absent from
  // `params` (inactive, or missing from a foreign trial), gets the middle of the interval.
  // Never fails.
  Genome Encode(const ParameterDict& params) const;

  // The active parameters at `genome`; genes outside [0, 1] are clamped first.
  ParameterDict Decode(absl::Span<const double> genome) const;

 private:
  // Constant after construction; one entry per gene.
  std::vector<FlatParameter> flat_;
  std::vector<GeneKind> kinds_;
  std::vector<int64_t> cardinality_;
  std::vector<bool> fixed_double_;  // kDouble with min == max
};

// A 64-bit fingerprint of an assignment, equal for equal dicts (exact values, names, types)
// and portable across runs and machines. Used to avoid suggesting a point twice.
uint64_t Fingerprint(const ParameterDict& params);

// Reflects `x` into [0, 1] (mirror at both ends, so a step past a bound bounces back).
double ReflectIntoUnit(double x);

// The cell (0 .. cells - 1) a gene falls in when [0, 1] is cut into `cells` equal cells, as
// categorical genes are (values past either end land in the end cells).
size_t CellOf(double gene, int64_t cells);
// The centre of cell `index` of `cells` equal cells.
double CellCentre(size_t index, size_t cells);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_GENOME_H_
