// The dashboard's view of one study, computed by evoscaled and served as one JSON document
// (GET /api/v1/studies/{s}/analysis): optimisation history, learning curves, the completed
// trials' parameters and metrics (parallel coordinates, slice plots, Pareto front), requested
// against used resources, and the capacity the study's trials held over time. For a study of
// one objective, its cost: the best value against the core-hours spent (the ended trials by
// end time; the best among SUCCEEDED trials, as ListOptimalTrials ranks them) and each trial's
// core-seconds against its value, with the cost-quality front (the SUCCEEDED trials no other
// beats on both); the budget, spent and remaining core-seconds of every study.
//
// Every series is bounded, so a page for a 10,000-trial study stays small and quick to draw:
// history and points are downsampled to at most max_points (keeping each bucket's extremes,
// every improvement of the best and the Pareto front), learning curves to max_curves lines of
// at most max_curve_points each. Each part says how many there were in all ("total") beside
// what it holds, so the page can say "1,000 of 10,000 trials".
#ifndef EVOSCALE_SERVICE_ANALYSIS_STUDY_ANALYSIS_H_
#define EVOSCALE_SERVICE_ANALYSIS_STUDY_ANALYSIS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "evoscale/v1/study.pb.h"

namespace evoscale::service {

struct AnalysisOptions {
  std::string metric;        // empty: the study's first metric
  int max_points = 2000;     // history, points, resources, capacity: 10..100000
  int max_curves = 100;      // learning curves: 0..1000
  int max_curve_points = 200;  // per curve: 2..10000
};

// An integer query field within [lo, hi]; else INVALID_ARGUMENT naming the field and the text.
absl::StatusOr<int> IntQueryParam(absl::string_view field, absl::string_view text, int lo, int hi);

// Reads metric, max_points, max_curves and max_curve_points from an HTTP query; a bad value is
// INVALID_ARGUMENT naming the field. Other keys are ignored.
absl::StatusOr<AnalysisOptions> ParseAnalysisQuery(
    const v1::StudySpec& spec, const std::vector<std::pair<std::string, std::string>>& query);

// Capacity in force for managed trials (the scheduler's), drawn as a limit; zero: unknown.
struct CapacityLimit {
  double cpu_cores = 0;
  double memory_bytes = 0;
};

// The JSON document for `study` and its `trials` (tombstones skipped). `now` ends the intervals
// of trials still running.
std::string StudyAnalysisJson(const v1::Study& study, absl::Span<const v1::Trial> trials,
                              const AnalysisOptions& options, const CapacityLimit& capacity,
                              absl::Time now);

// The documents asked for last, by study and options, each answered again while its study is
// unchanged: the same `trials_version` (StudyCore's, which every trial write moves: see
// ReadStudyRequest), the same study state and, while the document shows running trials'
// intervals ending at `now`, the same second. Every open dashboard asks every 2 s; a kept
// document costs a lookup, where building one reads every trial. Call it where the version and
// the trials agree (ReadStudyRequest's fn, under the study's lock). Thread-safe; at most 256
// documents (a few pages' worth), all dropped when full.
class AnalysisCache {
 public:
  std::string Document(const v1::Study& study, absl::Span<const v1::Trial> trials,
                       uint64_t trials_version, const AnalysisOptions& options,
                       const CapacityLimit& capacity, absl::Time now);

 private:
  struct Entry {
    uint64_t trials_version = 0;
    v1::Study::State state = v1::Study::STATE_UNSPECIFIED;
    std::optional<int64_t> second;  // set: the document shows `now`, and holds for this second
    std::string json;
  };

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);  // by study and options
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_ANALYSIS_STUDY_ANALYSIS_H_
