// The dashboard's view of one study, computed by evoscaled and served as one JSON document
// (GET /api/v1/studies/{s}/analysis): optimisation history, learning curves, the completed
// trials' parameters and metrics (parallel coordinates, slice plots, Pareto front), requested
// against used resources, and the capacity the study's trials held over time.
//
// Every series is bounded, so a page for a 10,000-trial study stays small and quick to draw:
// history and points are downsampled to at most max_points (keeping each bucket's extremes,
// every improvement of the best and the Pareto front), learning curves to max_curves lines of
// at most max_curve_points each. Each part says how many there were in all ("total") beside
// what it holds, so the page can say "1,000 of 10,000 trials".
#ifndef EVOSCALE_SERVICE_STUDY_ANALYSIS_H_
#define EVOSCALE_SERVICE_STUDY_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
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

// What StudyAnalysisJson's answer depends on, hashed: each trial's id, state, number of
// measurements and its last one, final values, request, usage and times, and the study's state; and, while trials that
// hold resources run, the time to the second (their capacity intervals end "now"). Equal
// fingerprints (for the same options) mean the same document, so a caller may keep the last
// one: O(trials) and about 1/500th of the document's cost.
uint64_t AnalysisFingerprint(const v1::Study& study, absl::Span<const v1::Trial> trials,
                             absl::Time now);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STUDY_ANALYSIS_H_
