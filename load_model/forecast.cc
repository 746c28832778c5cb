#include "load_model/forecast.h"

#include <algorithm>
#include <cmath>

namespace evoscale::load_model {

SeasonalForecaster::SeasonalForecaster(SeasonalForecastOptions options)
    : options_(options), season_(options.slots, 0.0), slot_seen_(options.slots, false) {}

int SeasonalForecaster::Slot(absl::Time time) const {
  const double phase = std::fmod(absl::FDivDuration(time - absl::UnixEpoch(), options_.period), 1.0);
  const int slot = static_cast<int>(std::floor((phase < 0 ? phase + 1 : phase) * options_.slots));
  return std::clamp(slot, 0, options_.slots - 1);
}

void SeasonalForecaster::Add(absl::Time time, double value) {
  const int slot = Slot(time);
  if (!has_level_) {
    level_ = value;
    has_level_ = true;
  }
  if (!slot_seen_[slot]) {
    slot_seen_[slot] = true;
    ++seen_slots_;
    season_[slot] = value - level_;
  } else {
    season_[slot] += options_.season_alpha * ((value - level_) - season_[slot]);
  }
  level_ += options_.level_alpha * ((value - season_[slot]) - level_);
}

double SeasonalForecaster::Forecast(absl::Time time) const {
  if (!seasonal_ready()) return level_;
  return level_ + season_[Slot(time)];
}

double SeasonalForecaster::MaxForecast(absl::Time from, absl::Duration horizon) const {
  double best = Forecast(from);
  const absl::Duration step = options_.period / options_.slots;
  for (absl::Duration d = step; d <= horizon; d += step) best = std::max(best, Forecast(from + d));
  return std::max(best, Forecast(from + horizon));
}

}  // namespace evoscale::load_model
