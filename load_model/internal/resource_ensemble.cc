#include "load_model/internal/resource_ensemble.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace evoscale::load_model::internal {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Hours(absl::Duration d) { return absl::StrFormat("%gh", absl::ToDoubleHours(d)); }
}  // namespace

ResourceEnsemble::ResourceEnsemble(EnsembleOptions options) : options_(std::move(options)) {
  for (size_t h = 0; h < options_.half_lives.size(); ++h) {
    histograms_.emplace_back(options_.histogram, options_.half_lives[h]);
    for (double p : options_.percentiles) {
      for (double m : options_.margins) {
        models_.push_back({Kind::kPercentile, static_cast<int>(h), p, m, 0,
                           absl::StrFormat("p%g/%s x%g", 100 * p,
                                           Hours(options_.half_lives[h]), m)});
      }
    }
  }
  peaks_.resize(options_.peak_windows.size());
  for (size_t w = 0; w < options_.peak_windows.size(); ++w) {
    for (double m : options_.peak_margins) {
      models_.push_back({Kind::kPeak, static_cast<int>(w), 1.0, m, 0,
                         absl::StrFormat("max/%s x%g", Hours(options_.peak_windows[w]), m)});
    }
  }
  for (int s = 0; s < options_.season_slots; ++s) {
    season_.emplace_back(options_.histogram, options_.seasonal_half_life);
  }
  if (options_.season_slots > 0) {
    for (double p : options_.percentiles) {
      for (double m : options_.margins) {
        models_.push_back({Kind::kSeasonal, 0, p, m, 0,
                           absl::StrFormat("seasonal p%g/%s-slot +%s x%g", 100 * p,
                                           Hours(options_.season / options_.season_slots),
                                           Hours(options_.seasonal_lead), m)});
      }
    }
  }
  limits_.resize(models_.size());
}

int ResourceEnsemble::SeasonSlot(absl::Time time) const {
  const double phase =
      std::fmod(absl::FDivDuration(time - absl::UnixEpoch(), options_.season), 1.0);
  const int slot = static_cast<int>((phase < 0 ? phase + 1 : phase) * options_.season_slots);
  return std::clamp(slot, 0, options_.season_slots - 1);
}

void ResourceEnsemble::ComputeLimits(absl::Time now, std::vector<double>* limits) {
  // Percentiles are shared by every margin of a (histogram, percentile) pair; compute once.
  std::vector<double> cache(histograms_.size() * options_.percentiles.size(), kNaN);
  std::vector<double> season_cache(options_.percentiles.size(), kNaN);
  const bool season_ready =
      options_.season_slots > 0 && has_sample_ && now - first_time_ >= options_.season;
  for (size_t i = 0; i < models_.size(); ++i) {
    const Model& m = models_[i];
    double base = kNaN;
    const size_t pi = std::find(options_.percentiles.begin(), options_.percentiles.end(),
                                m.percentile) -
                      options_.percentiles.begin();
    switch (m.kind) {
      case Kind::kPercentile: {
        double& c = cache[m.source * options_.percentiles.size() + pi];
        if (std::isnan(c) && !histograms_[m.source].IsEmpty()) {
          c = histograms_[m.source].Percentile(m.percentile);
        }
        base = c;
        break;
      }
      case Kind::kPeak:
        if (!peaks_[m.source].empty()) base = peaks_[m.source].front().second;
        break;
      case Kind::kSeasonal: {
        if (!season_ready) break;
        double& c = season_cache[pi];
        if (std::isnan(c)) {
          const auto& a = season_[SeasonSlot(now)];
          const auto& b = season_[SeasonSlot(now + options_.seasonal_lead)];
          if (!a.IsEmpty() && !b.IsEmpty()) {
            c = std::max(a.Percentile(m.percentile), b.Percentile(m.percentile));
          }
        }
        base = c;
        break;
      }
    }
    (*limits)[i] = std::isnan(base) ? kNaN : std::max(base * m.margin, options_.floor);
  }
}

void ResourceEnsemble::Add(absl::Time time, double usage) {
  if (!std::isfinite(usage) || usage < 0) return;
  if (has_sample_) {
    // Score the limits each model would have set just before this sample.
    ComputeLimits(time, &limits_);
    const double decay =
        std::exp2(-absl::FDivDuration(time - last_time_, options_.cost_half_life));
    for (size_t i = 0; i < models_.size(); ++i) {
      Model& m = models_[i];
      m.cost *= decay;
      const double limit = limits_[i];
      if (std::isnan(limit)) {
        m.cost += options_.overrun_weight;  // A model without history cannot be trusted yet.
        continue;
      }
      if (usage > limit) {
        m.cost += options_.overrun_weight;
      } else if (limit > 0) {
        m.cost += (limit - usage) / limit;
      }
    }
    // Switch only for a clear improvement, so that the limit does not flap between models.
    int best = chosen_;
    for (size_t i = 0; i < models_.size(); ++i) {
      if (models_[i].cost < models_[best].cost) best = static_cast<int>(i);
    }
    if (models_[best].cost < (1.0 - options_.switch_margin) * models_[chosen_].cost) {
      chosen_ = best;
    }
  } else {
    first_time_ = time;
    // Start from the most conservative model: the largest percentile and margin.
    for (size_t i = 0; i < models_.size(); ++i) {
      const Model& m = models_[i];
      const Model& c = models_[chosen_];
      if (m.kind == Kind::kPercentile &&
          (c.kind != Kind::kPercentile || m.percentile * m.margin > c.percentile * c.margin)) {
        chosen_ = static_cast<int>(i);
      }
    }
  }
  has_sample_ = true;
  last_time_ = time;
  for (auto& h : histograms_) h.AddSample(usage, 1.0, time);
  for (size_t w = 0; w < peaks_.size(); ++w) {
    auto& q = peaks_[w];
    while (!q.empty() && q.back().second <= usage) q.pop_back();
    q.emplace_back(time, usage);
    while (q.front().first <= time - options_.peak_windows[w]) q.pop_front();
  }
  if (options_.season_slots > 0) season_[SeasonSlot(time)].AddSample(usage, 1.0, time);
}

double ResourceEnsemble::Limit(absl::Time now) {
  if (!has_sample_) return options_.floor;
  // Expire peaks that left their window by `now`.
  for (size_t w = 0; w < peaks_.size(); ++w) {
    auto& q = peaks_[w];
    while (q.size() > 1 && q.front().first <= now - options_.peak_windows[w]) q.pop_front();
  }
  ComputeLimits(now, &limits_);
  double limit = limits_[chosen_];
  if (std::isnan(limit)) {
    // Fall back to the largest available limit.
    limit = options_.floor;
    for (double l : limits_) {
      if (!std::isnan(l)) limit = std::max(limit, l);
    }
  }
  return std::max(limit, options_.floor);
}

std::string ResourceEnsemble::ChosenModel() const { return models_[chosen_].name; }

}  // namespace evoscale::load_model::internal
