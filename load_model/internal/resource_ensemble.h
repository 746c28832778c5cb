// An Autopilot-style ensemble for one resource: many simple limit models, scored online by
// their decayed overrun and slack costs; the cheapest one gives the limit.
#ifndef EVOSCALE_LOAD_MODEL_INTERNAL_RESOURCE_ENSEMBLE_H_
#define EVOSCALE_LOAD_MODEL_INTERNAL_RESOURCE_ENSEMBLE_H_

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "load_model/decaying_histogram.h"

namespace evoscale::load_model::internal {

struct EnsembleOptions {
  HistogramOptions histogram = HistogramOptions::VpaCpu();
  std::vector<absl::Duration> half_lives;
  std::vector<double> percentiles;
  std::vector<double> margins;
  std::vector<absl::Duration> peak_windows;  // Recent-maximum models.
  std::vector<double> peak_margins;
  // Seasonal per-slot percentile models (none when season_slots == 0).
  absl::Duration season = absl::Hours(24);
  int season_slots = 0;
  absl::Duration seasonal_lead = absl::Hours(1);
  absl::Duration seasonal_half_life = absl::Hours(24 * 7);
  double overrun_weight = 10;
  absl::Duration cost_half_life = absl::Hours(48);
  double switch_margin = 0.05;
  double floor = 0;
};

// Not thread-safe.
class ResourceEnsemble {
 public:
  explicit ResourceEnsemble(EnsembleOptions options);

  // Scores every model's current limit against `usage` at `time`, then learns from it.
  void Add(absl::Time time, double usage);
  // The chosen model's limit at `now` (>= floor); the floor before any sample.
  double Limit(absl::Time now);
  // Name of the chosen model, e.g. "p95/6h x1.05".
  std::string ChosenModel() const;
  int num_models() const { return static_cast<int>(models_.size()); }

 private:
  enum class Kind { kPercentile, kPeak, kSeasonal };
  struct Model {
    Kind kind;
    int source;      // Histogram index, peak window index or seasonal percentile index.
    double percentile;
    double margin;
    double cost = 0;
    std::string name;
  };
  // Limits of every model at `now`; NaN for models without enough history.
  void ComputeLimits(absl::Time now, std::vector<double>* limits);
  int SeasonSlot(absl::Time time) const;

  const EnsembleOptions options_;
  std::vector<DecayingHistogram> histograms_;  // One per half-life.
  std::vector<std::deque<std::pair<absl::Time, double>>> peaks_;  // Monotonic, per window.
  std::vector<DecayingHistogram> season_;      // One per slot.
  std::vector<Model> models_;
  std::vector<double> limits_;  // Scratch.
  int chosen_ = 0;
  bool has_sample_ = false;
  absl::Time first_time_;
  absl::Time last_time_;
};

}  // namespace evoscale::load_model::internal

#endif  // EVOSCALE_LOAD_MODEL_INTERNAL_RESOURCE_ENSEMBLE_H_
