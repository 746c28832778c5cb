#include "load_model/evoscale_policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_format.h"
#include "load_model/internal/resource_ensemble.h"
#include "load_model/queueing.h"

namespace evoscale::load_model {

namespace {

// Samples before the load model's forecast replaces the plain demand level.
constexpr double kMinFitSamples = 30;

internal::EnsembleOptions CpuEnsemble(const EvoscaleResourceOptions& o) {
  internal::EnsembleOptions e;
  e.histogram = *HistogramOptions::Exponential(1000.0, 0.001, 1.02, 1e-6);
  e.half_lives = {absl::Hours(2), absl::Hours(12), absl::Hours(48)};
  e.percentiles = {0.9, 0.95, 0.98, 0.995};
  e.margins = {1.0, 1.1, 1.25};
  e.peak_windows = {absl::Hours(1), absl::Hours(6)};
  e.peak_margins = {1.0, 1.2};
  e.season = o.season;
  e.season_slots = o.season_slots;
  e.seasonal_lead = o.seasonal_lead;
  e.overrun_weight = o.cpu_overrun_weight;
  e.cost_half_life = o.cost_half_life;
  e.switch_margin = o.switch_margin;
  e.floor = o.min_cpu_cores;
  return e;
}

internal::EnsembleOptions MemoryEnsemble(const EvoscaleResourceOptions& o) {
  internal::EnsembleOptions e;
  e.histogram = *HistogramOptions::Exponential(1e13, 1e6, 1.02, 1e-6);
  // Memory is incompressible and its peaks recur: only recent-peak models, over windows long
  // enough to have seen the last few peaks.
  e.peak_windows = {absl::Hours(168)};
  e.peak_margins = {1.15, 1.2};
  e.overrun_weight = o.memory_overrun_weight;
  e.cost_half_life = o.cost_half_life;
  e.switch_margin = o.switch_margin;
  e.floor = o.min_memory_bytes;
  return e;
}

}  // namespace

EvoscaleResourceRecommender::EvoscaleResourceRecommender(EvoscaleResourceOptions options)
    : options_(options),
      cpu_(std::make_unique<internal::ResourceEnsemble>(CpuEnsemble(options))),
      memory_(std::make_unique<internal::ResourceEnsemble>(MemoryEnsemble(options))) {
  // The same buckets as the ensembles' histograms.
  if (options_.cpu_request_percentile > 0) {
    cpu_usage_ = std::make_unique<DecayingHistogram>(CpuEnsemble(options_).histogram,
                                                     options_.request_half_life);
  }
  if (options_.memory_request_percentile > 0) {
    memory_usage_ = std::make_unique<DecayingHistogram>(MemoryEnsemble(options_).histogram,
                                                        options_.request_half_life);
  }
}

EvoscaleResourceRecommender::~EvoscaleResourceRecommender() = default;

void EvoscaleResourceRecommender::AddSample(const UsageSample& sample) {
  if (samples_ > 0 && sample.time <= last_sample_) return;
  if (sample.time > decided_at_) {
    Decide(sample.time, &applied_);
    decided_at_ = sample.time;
  }
  // Calibrate each margin on whether this sample overran the limit in force (the last one
  // recommended), once there is enough history for the limits to mean something.
  if (samples_ > 0 && sample.time - first_sample_ >= options_.calibrate_after) {
    auto calibrate = [&](double rate, double usage, double limit, double* log_margin) {
      if (rate <= 0 || limit <= 0) return;
      *log_margin += options_.calibration_step * ((usage > limit ? 1.0 : 0.0) - rate);
      *log_margin = std::clamp(*log_margin, std::log(options_.min_margin),
                               std::log(options_.max_margin));
    };
    calibrate(options_.target_throttle_rate, sample.cpu_cores, applied_.cpu, &log_cpu_margin_);
    calibrate(options_.target_oom_rate, sample.memory_bytes, applied_.memory,
              &log_memory_margin_);
  }
  if (samples_ == 0) first_sample_ = sample.time;
  last_sample_ = sample.time;
  ++samples_;
  cpu_->Add(sample.time, sample.cpu_cores);
  memory_->Add(sample.time, sample.memory_bytes);
  if (cpu_usage_) cpu_usage_->AddSample(sample.cpu_cores, 1.0, sample.time);
  if (memory_usage_) memory_usage_->AddSample(sample.memory_bytes, 1.0, sample.time);
}

void EvoscaleResourceRecommender::RecordOom(absl::Time time, double memory_limit_bytes) {
  const double bumped = std::max(memory_limit_bytes + options_.oom_min_bump_bytes,
                                 memory_limit_bytes * options_.oom_bump_ratio);
  if (time < oom_floor_until_) {
    oom_floor_ = std::max(oom_floor_, bumped);
  } else {
    oom_floor_ = bumped;
  }
  oom_floor_until_ = time + options_.oom_hold;
}

void EvoscaleResourceRecommender::Decide(absl::Time now, Applied* applied) const {
  const double cpu =
      std::max(cpu_->Limit(now) * std::exp(log_cpu_margin_), options_.min_cpu_cores);
  double memory =
      std::max(memory_->Limit(now) * std::exp(log_memory_margin_), options_.min_memory_bytes);
  applied->oom_floor = now < oom_floor_until_ && oom_floor_ > memory;
  if (applied->oom_floor) memory = oom_floor_;
  auto stabilise = [&](double fresh, double* in_force) {
    if (fresh > *in_force || fresh < *in_force * (1.0 - options_.decrease_hysteresis)) {
      *in_force = fresh;
    }
  };
  stabilise(cpu, &applied->cpu);
  stabilise(memory, &applied->memory);
  // The request: the limit, or a usage percentile below it, held by the same hysteresis (so the
  // band below stays true of it) and never above the limit in force.
  auto request = [&](const DecayingHistogram* usage, double percentile, double limit,
                     double floor, double* in_force) {
    if (usage == nullptr || usage->IsEmpty()) {
      *in_force = limit;
      return;
    }
    stabilise(std::clamp(usage->Percentile(percentile), floor, limit), in_force);
    *in_force = std::min(*in_force, limit);
  };
  request(cpu_usage_.get(), options_.cpu_request_percentile, applied->cpu, options_.min_cpu_cores,
          &applied->cpu_request);
  request(memory_usage_.get(), options_.memory_request_percentile, applied->memory,
          options_.min_memory_bytes, &applied->memory_request);
}

ResourceRecommendation EvoscaleResourceRecommender::Recommend(absl::Time now) {
  Decide(now, &applied_);
  decided_at_ = std::max(decided_at_, now);
  return Answer(applied_);
}

ResourceRecommendation EvoscaleResourceRecommender::Peek(absl::Time now) {
  Applied applied = applied_;
  Decide(now, &applied);
  return Answer(applied);
}

ResourceRecommendation EvoscaleResourceRecommender::Answer(const Applied& applied) const {
  ResourceRecommendation rec;
  // The band says what evoscale itself would leave alone: a request from the target up to
  // the target / (1 - decrease_hysteresis) stands (below the target it is raised, above the
  // band lowered), so an updater that acts only outside [lower, upper], as the VPA's does,
  // moves pods exactly when evoscale's own recommendation would move.
  const double widen = 1.0 / (1.0 - std::clamp(options_.decrease_hysteresis, 0.0, 0.9));
  const double cpu_request = applied.cpu_request, memory_request = applied.memory_request;
  rec.cpu_cores = {cpu_request, cpu_request, cpu_request * widen, applied.cpu};
  rec.memory_bytes = {memory_request, memory_request, memory_request * widen, applied.memory};
  const double lifespan =
      samples_ == 0 ? 0 : absl::FDivDuration(last_sample_ - first_sample_, absl::Hours(24));
  rec.confidence = std::min(lifespan, samples_ / 1440.0);
  rec.explanation = absl::StrFormat("evoscale: cpu from %s x %.2f, memory from %s x %.2f%s",
                                    cpu_->ChosenModel(), std::exp(log_cpu_margin_),
                                    memory_->ChosenModel(), std::exp(log_memory_margin_),
                                    applied.oom_floor ? " (raised after an OOM)" : "");
  return rec;
}

EvoscaleReplicaRecommender::EvoscaleReplicaRecommender(EvoscaleReplicaOptions options)
    : options_(options),
      model_(4 + std::max(options.demand_lags, 1) + std::max(options.qps_lags, 1),
             options.regression_forgetting, 1e-3),
      seasonal_(options.seasonal) {}

double EvoscaleReplicaRecommender::ErrorScale(double forecast) const {
  return options_.error_scale_exponent == 0
             ? 1.0
             : std::pow(std::max(forecast, 0.0) + 1.0, options_.error_scale_exponent);
}

Eigen::VectorXd EvoscaleReplicaRecommender::Features(absl::Time next_time) const {
  const int nd = std::max(options_.demand_lags, 1), nq = std::max(options_.qps_lags, 1);
  Eigen::VectorXd x(4 + nd + nq);
  const double seasonal =
      seasonal_.seasonal_ready() ? seasonal_.Forecast(next_time) : level_demand_;
  int k = 0;
  x[k++] = 1.0;
  // Lags not yet seen repeat the oldest one seen.
  for (int i = 0; i < nd; ++i) {
    x[k++] = demand_lags_.empty()
                 ? 0.0
                 : demand_lags_[std::min<size_t>(i, demand_lags_.size() - 1)];
  }
  for (int i = 0; i < nq; ++i) {
    x[k++] = qps_lags_.empty() ? 0.0 : qps_lags_[std::min<size_t>(i, qps_lags_.size() - 1)];
  }
  x[k++] = level_demand_;
  x[k++] = level_qps_;
  x[k++] = seasonal;
  return x;
}

double EvoscaleReplicaRecommender::Forecast(const Eigen::VectorXd& x) {
  // Before the load model has seen enough samples, trust the demand level.
  return model_.effective_samples() >= kMinFitSamples ? std::max(model_.Predict(x), 0.0)
                                                      : std::max(demand_, level_demand_);
}

int EvoscaleReplicaRecommender::Horizon() const {
  if (options_.startup_delay <= absl::ZeroDuration() || step_ <= absl::ZeroDuration()) return 1;
  return 1 + static_cast<int>(std::ceil(absl::FDivDuration(options_.startup_delay, step_) - 1e-9));
}

void EvoscaleReplicaRecommender::Learn(const Eigen::VectorXd& x, double forecast, double demand) {
  errors_.push_back((demand - forecast) / ErrorScale(forecast));
  while (static_cast<int>(errors_.size()) > options_.error_window) errors_.pop_front();
  model_.Update(x, demand);
}

void EvoscaleReplicaRecommender::AddSample(const LoadSample& sample) {
  const double demand = std::max(sample.utilization, 0.0) * std::max(sample.replicas, 0);
  const double qps = std::max(sample.qps, 0.0);
  const bool delayed = options_.startup_delay > absl::ZeroDuration();
  if (has_sample_) {
    if (sample.time <= last_time_) return;
    const absl::Duration dt = sample.time - last_time_;
    step_ = samples_ < 2 ? dt : (step_ * 9 + dt) / 10;
    if (!delayed) {
      // Learn the one-step model from the previous features and this outcome, recording the
      // error of the forecast the model would have made for this sample.
      const Eigen::VectorXd x = Features(sample.time);
      Learn(x, Forecast(x), demand);
    }
  }
  // Forecasts made for about this sample's time (or earlier) learn from its outcome.
  while (delayed && !ahead_.empty() && ahead_.front().time <= sample.time + step_ / 2) {
    Learn(ahead_.front().features, ahead_.front().forecast, demand);
    ahead_.pop_front();
  }
  const double alpha = 0.3;
  level_demand_ = has_sample_ ? level_demand_ + alpha * (demand - level_demand_) : demand;
  level_qps_ = has_sample_ ? level_qps_ + alpha * (qps - level_qps_) : qps;
  demand_ = demand;
  qps_ = qps;
  demand_lags_.push_front(demand);
  while (static_cast<int>(demand_lags_.size()) > std::max(options_.demand_lags, 1)) {
    demand_lags_.pop_back();
  }
  qps_lags_.push_front(qps);
  while (static_cast<int>(qps_lags_.size()) > std::max(options_.qps_lags, 1)) {
    qps_lags_.pop_back();
  }
  if (level_qps_ > 1e-9) {
    const double s = level_demand_ / level_qps_;  // Busy replica-seconds per request.
    service_time_s_ = service_time_s_ == 0 ? s : service_time_s_ + 0.05 * (s - service_time_s_);
  }
  seasonal_.Add(sample.time, demand);
  has_sample_ = true;
  last_time_ = sample.time;
  ++samples_;
  if (delayed && samples_ >= 2) {
    // What the model would forecast now for the horizon, to learn from when it arrives.
    const absl::Time target = sample.time + Horizon() * step_;
    Eigen::VectorXd x = Features(target);
    const double forecast = Forecast(x);
    ahead_.push_back({target, std::move(x), forecast});
  }
}

ReplicaRecommendation EvoscaleReplicaRecommender::Recommend(absl::Time now,
                                                           int current_replicas) {
  ReplicaRecommendation rec;
  if (!has_sample_) {
    rec.replicas = std::clamp(current_replicas, options_.min_replicas, options_.max_replicas);
    rec.explanation = "evoscale: no telemetry yet";
    return rec;
  }
  const absl::Time next = std::max(now, last_time_) + Horizon() * step_;
  const double forecast = Forecast(Features(next));

  // Upper quantile of recent one-step errors.
  double headroom = 0;
  if (errors_.size() >= 20) {
    std::vector<double> e(errors_.begin(), errors_.end());
    const size_t k = std::min(e.size() - 1, static_cast<size_t>(options_.demand_quantile * e.size()));
    std::nth_element(e.begin(), e.begin() + k, e.end());
    headroom = std::max(e[k], 0.0) * ErrorScale(forecast);
  } else {
    headroom = std::max(demand_, level_demand_) * 0.5;
  }
  const double demand_bound = forecast + headroom;
  int replicas = static_cast<int>(std::ceil(demand_bound / options_.target_utilization - 1e-9));
  std::string why = absl::StrFormat("demand forecast %.2f + q%.0f error %.2f at %.0f%% target",
                                    forecast, 100 * options_.demand_quantile, headroom,
                                    100 * options_.target_utilization);
  if (Horizon() > 1) why += absl::StrFormat(" (%d steps ahead: replicas take %s to start)", Horizon(), absl::FormatDuration(options_.startup_delay));
  // Latency check from the queueing model: with the forecast demand as offered load (busy
  // replicas, by Little's law), the M/M/c mean queue wait relative to the service time
  // depends only on the replica count.
  if (options_.max_queue_wait_in_service_times > 0 && forecast > 0) {
    const int for_latency = MinServersForWait(forecast, 1.0,
                                              options_.max_queue_wait_in_service_times,
                                              options_.max_replicas);
    if (for_latency > replicas) {
      replicas = for_latency;
      why += absl::StrFormat("; raised to %d for the M/M/c queue wait", for_latency);
    }
  }
  if (service_time_s_ > 0) {
    why += absl::StrFormat("; load model %.2f replica-s per request", service_time_s_);
  }
  replicas = std::clamp(replicas, options_.min_replicas, options_.max_replicas);

  // Stabilisation: go down only as far as the recent recommendations agree.
  recent_.push_back(replicas);
  const int window = options_.startup_delay > absl::ZeroDuration()
                         ? std::max(options_.scale_down_window, Horizon() + 1)
                         : options_.scale_down_window;
  while (static_cast<int>(recent_.size()) > std::max(window, 1)) {
    recent_.pop_front();
  }
  int result = replicas;
  if (replicas < current_replicas) {
    result = std::min(current_replicas, *std::max_element(recent_.begin(), recent_.end()));
  }
  rec.replicas = result;
  rec.confidence = std::min(1.0, samples_ / 60.0);
  rec.explanation = "evoscale: " + why;
  return rec;
}

}  // namespace evoscale::load_model
