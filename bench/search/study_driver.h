// Runs an ask/tell study either on the search library directly (the way service/ drives a
// Designer: Update with the trials completed since the last call plus the pending ones,
// then Suggest(count, trials so far)) or on a running evoscaled over gRPC.
#ifndef EVOSCALE_BENCH_SEARCH_STUDY_DRIVER_H_
#define EVOSCALE_BENCH_SEARCH_STUDY_DRIVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "search/types.h"

namespace evoscale::bench {

struct Suggestion {
  int64_t id = 0;
  std::vector<double> x;  // x0, x1, ... in order
  search::ParameterDict params;  // the library study's assignment as suggested
};

class StudyDriver {
 public:
  virtual ~StudyDriver() = default;
  // Up to `count` new trials (fewer only when the study ran out).
  virtual absl::StatusOr<std::vector<Suggestion>> Suggest(int count) = 0;
  virtual absl::Status Complete(int64_t id, const std::map<std::string, double>& metrics) = 0;
};

// A box [lower, upper]^dims of doubles named x0..x{dims-1} (or, on the library only, any
// `space`), the given metrics (all minimised), an algorithm and a seed.
struct StudySetup {
  int dims = 0;
  search::SearchSpace space;  // used instead of the box when it has parameters
  double lower = 0, upper = 1;
  std::vector<std::string> metrics;
  search::Algorithm algorithm = search::Algorithm::kGenetic;
  uint64_t seed = 0;
  int max_trials = 0;
  std::map<std::string, std::string> settings;  // AlgorithmSpec.settings
};

absl::StatusOr<std::unique_ptr<StudyDriver>> NewLibraryStudy(const StudySetup& setup);
// `server` is HOST:PORT of a running evoscaled; the study is deleted when the driver is.
absl::StatusOr<std::unique_ptr<StudyDriver>> NewGrpcStudy(const std::string& server,
                                                          const StudySetup& setup);

std::string AlgorithmName(search::Algorithm algorithm);
// "GENETIC,NSGA2,..." by AlgorithmName; INVALID_ARGUMENT naming an unknown one.
absl::StatusOr<std::vector<search::Algorithm>> ParseAlgorithms(const std::string& list);
// AlgorithmSpec.settings from "key=value,key=value".
std::map<std::string, std::string> ParseSettings(const std::string& list);
// The median of `v` (NaN when empty).
double Median(std::vector<double> v);

}  // namespace evoscale::bench

#endif  // EVOSCALE_BENCH_SEARCH_STUDY_DRIVER_H_
