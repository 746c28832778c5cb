// Seasonal forecasts: a level plus a per-slot seasonal profile (additive Holt-Winters
// without trend), so that scale-up can come before a recurring peak.
#ifndef EVOSCALE_LOAD_MODEL_FORECAST_H_
#define EVOSCALE_LOAD_MODEL_FORECAST_H_

#include <vector>

#include "absl/time/time.h"

namespace evoscale::load_model {

struct SeasonalForecastOptions {
  absl::Duration period = absl::Hours(24);
  int slots = 48;              // Profile resolution: period / slots per slot.
  double level_alpha = 0.05;   // Smoothing of the deseasonalised level, per sample.
  double season_alpha = 0.1;   // Smoothing of a slot's profile value, per visit.
};

// Not thread-safe. O(slots) memory.
class SeasonalForecaster {
 public:
  explicit SeasonalForecaster(SeasonalForecastOptions options = {});

  void Add(absl::Time time, double value);
  // Forecast at `time`; the level alone until one period has been observed.
  double Forecast(absl::Time time) const;
  // Largest forecast over [from, from + horizon], stepping a slot at a time.
  double MaxForecast(absl::Time from, absl::Duration horizon) const;
  // True once every slot has been seen at least once.
  bool seasonal_ready() const { return seen_slots_ == options_.slots; }
  double level() const { return level_; }

 private:
  int Slot(absl::Time time) const;

  const SeasonalForecastOptions options_;
  double level_ = 0;
  bool has_level_ = false;
  std::vector<double> season_;  // (slots), additive offsets.
  std::vector<bool> slot_seen_;
  int seen_slots_ = 0;
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_FORECAST_H_
