// evoscale's own autoscaling policies, the default:
//  - EvoscaleResourceRecommender (container requests): an ensemble of recommenders in the
//    manner of Google's Autopilot (EuroSys 2020) - decaying-histogram percentiles with
//    different half-lives, percentiles and margins, recent-peak models, and seasonal
//    per-time-of-day models that look one slot ahead so requests rise before a daily peak -
//    choosing, at each step, the model with the least recent cost (overruns weighed against
//    relative slack, with a penalty for switching). Memory adds an OOM bump.
//  - EvoscaleReplicaRecommender (replica counts): a load model regressing next-step demand
//    on recent demand and QPS (online least squares), an empirical upper quantile of its
//    errors, per-replica capacity at the utilisation target, an M/M/c latency check, and
//    stabilisation against flapping.
#ifndef EVOSCALE_LOAD_MODEL_EVOSCALE_POLICY_H_
#define EVOSCALE_LOAD_MODEL_EVOSCALE_POLICY_H_

#include <deque>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "load_model/decaying_histogram.h"
#include "load_model/forecast.h"
#include "load_model/recommender.h"
#include "load_model/regression.h"

namespace evoscale::load_model {

namespace internal {
class ResourceEnsemble;
}  // namespace internal

struct EvoscaleResourceOptions {
  // Floors: Kubernetes' own granularity, not the VPA's 25 m / 250 MiB.
  double min_cpu_cores = 0.001;
  double min_memory_bytes = 16.0 * 1024 * 1024;
  // Cost per sample: overrun_weight x [usage > limit] + (limit - usage)+ / limit, decayed
  // with cost_half_life. The ratio sets how much slack one overrun is worth. Chosen on
  // Bitbrains VMs 1-5 (VMs 6-10 held out; bench/load_model/README.md).
  double cpu_overrun_weight = 8.0;
  double memory_overrun_weight = 60.0;
  absl::Duration cost_half_life = absl::Hours(168);
  // Another model must beat the current one by this fraction of its cost to take over.
  double switch_margin = 0.05;
  // OOM: the memory limit stays >= max(+100 MiB, x1.2) of the killed limit for this long.
  double oom_min_bump_bytes = 100.0 * 1024 * 1024;
  double oom_bump_ratio = 1.2;
  absl::Duration oom_hold = absl::Hours(24);
  // Seasonal models: per-slot histograms over this period, looking `seasonal_lead` ahead.
  absl::Duration season = absl::Hours(24);
  int season_slots = 24;
  absl::Duration seasonal_lead = absl::Hours(1);
  // Against flapping: a recommendation rises at once but falls only when the new value is
  // more than this fraction below the current one.
  double decrease_hysteresis = 0.1;
  // Requests apart from limits: the ensemble's value is the limit (where overruns are OOM
  // kills and throttling) and the request is this percentile of usage over a decaying
  // histogram (half-life request_half_life), never above the limit. 0: request = limit.
  double cpu_request_percentile = 0;
  double memory_request_percentile = 0;
  absl::Duration request_half_life = absl::Hours(24);
  // The risk knob: target rates, per sample, of OOM kills (memory above its limit) and of
  // throttled samples (CPU above its limit). Each limit carries a margin calibrated online
  // from the workload's own overruns (adaptive conformal inference, Gibbs & Candes 2021:
  // log margin += calibration_step x (overrun - rate)), so that in the long run a workload
  // overruns at about that rate; the margin stays in [min_margin, max_margin]. 0: no
  // calibration (margin 1). Calibration starts once calibrate_after of samples are seen.
  // Chosen on Bitbrains VMs 1-5: memory at 4e-4 (about one OOM in 2,500 samples; the VPA's
  // rate there is 2e-4) trims memory slack 1.3% at 7 OOMs vs the VPA's 8; CPU calibration is
  // off, because holding every VM to one throttling rate cost more slack than the ensemble's
  // own choice at equal throttling (bench/load_model/README.md).
  double target_oom_rate = 4e-4;
  double target_throttle_rate = 0;
  double calibration_step = 0.05;
  double min_margin = 0.5;
  double max_margin = 2.0;
  absl::Duration calibrate_after = absl::Hours(24);
};

// Not thread-safe. Memory: a few hundred KiB (histograms for every model).
class EvoscaleResourceRecommender : public ResourceRecommender {
 public:
  explicit EvoscaleResourceRecommender(EvoscaleResourceOptions options = {});
  ~EvoscaleResourceRecommender() override;

  // A sample at a time no Recommend has decided for yet first decides the recommendation in
  // force at its time (as Recommend would), so the hysteresis and the calibrated margins move
  // once per sample whether or not anyone asked.
  void AddSample(const UsageSample& sample) override;
  void RecordOom(absl::Time time, double memory_limit_bytes) override;
  ResourceRecommendation Recommend(absl::Time now) override;
  ResourceRecommendation Peek(absl::Time now) override;

 private:
  // What is in force: the limits and the requests, after the hysteresis.
  struct Applied {
    double cpu = 0, memory = 0;                  // limits
    double cpu_request = 0, memory_request = 0;  // = the limits unless requests are apart
    bool oom_floor = false;  // the memory limit is the OOM floor (this decision's)
  };
  // Decides at `now` against *applied, which it updates: a limit, and a request apart from it,
  // rises at once and falls only past the hysteresis; a request never exceeds its limit.
  void Decide(absl::Time now, Applied* applied) const;
  ResourceRecommendation Answer(const Applied& applied) const;

  const EvoscaleResourceOptions options_;
  std::unique_ptr<internal::ResourceEnsemble> cpu_;
  std::unique_ptr<internal::ResourceEnsemble> memory_;
  std::unique_ptr<DecayingHistogram> cpu_usage_;     // For requests apart from limits.
  std::unique_ptr<DecayingHistogram> memory_usage_;
  Applied applied_;  // decided at decided_at_
  absl::Time decided_at_ = absl::InfinitePast();
  double log_cpu_margin_ = 0;  // Calibrated margins (log), see target_*_rate.
  double log_memory_margin_ = 0;
  double oom_floor_ = 0;
  absl::Time oom_floor_until_ = absl::InfinitePast();
  absl::Time first_sample_ = absl::InfinitePast();
  absl::Time last_sample_ = absl::InfinitePast();
  int64_t samples_ = 0;
};

struct EvoscaleReplicaOptions {
  double target_utilization = 0.6;  // Per-replica capacity is this share of one replica.
  int min_replicas = 1;
  int max_replicas = 10000;
  // Replicas cover this quantile of the one-step-ahead demand forecast. This, the
  // stabilisation window and the regressors were chosen on the first half of the Alibaba
  // GenAI trace (the second half held out; bench/load_model/README.md).
  double demand_quantile = 0.75;
  int error_window = 480;            // Samples of forecast error kept for the quantile.
  double regression_forgetting = 0.99;
  // Regressors: the last `demand_lags` demands and `qps_lags` QPS values (plus a constant,
  // the demand and QPS levels and the seasonal forecast).
  int demand_lags = 1;
  int qps_lags = 1;
  // Forecast errors are kept relative to (forecast + 1)^error_scale_exponent, so that the
  // headroom scales with the load (0: absolute errors; 0.5: Poisson-like noise).
  double error_scale_exponent = 0;
  // Latency check: mean M/M/c queue wait at most this many service times (0: off). The
  // service time per request comes from the load model (demand / QPS).
  double max_queue_wait_in_service_times = 1.0;
  // Stabilisation: scale down to the largest recommendation of the last this-many decisions;
  // scale up at once.
  int scale_down_window = 2;
  // Seasonal component (used once a full period is seen).
  SeasonalForecastOptions seasonal{absl::Hours(24), 96, 0.05, 0.1};
  // How long a new replica takes to serve (model loading). Above 0, the load model forecasts
  // the demand that far ahead plus one step (the first step a replica added now can serve),
  // its error quantile is that horizon's, and scaling down waits for the recommendations of
  // that many steps plus one to agree (a replica removed now cannot be back sooner).
  absl::Duration startup_delay = absl::ZeroDuration();
};

// Not thread-safe.
class EvoscaleReplicaRecommender : public ReplicaRecommender {
 public:
  explicit EvoscaleReplicaRecommender(EvoscaleReplicaOptions options = {});

  void AddSample(const LoadSample& sample) override;
  ReplicaRecommendation Recommend(absl::Time now, int current_replicas) override;

 private:
  Eigen::VectorXd Features(absl::Time next_time) const;
  // The load model's demand forecast from `x` (the demand level until it has been fitted).
  // Not const: OnlineLinearRegression::Predict is not.
  double Forecast(const Eigen::VectorXd& x);
  // Steps ahead the forecast looks: 1, or 1 + the start-up delay in steps.
  int Horizon() const;
  void Learn(const Eigen::VectorXd& x, double forecast, double demand);

  const EvoscaleReplicaOptions options_;
  OnlineLinearRegression model_;  // Next-step demand from the features below.
  SeasonalForecaster seasonal_;
  double ErrorScale(double forecast) const;

  std::deque<double> errors_;     // (demand - forecast) / ErrorScale, most recent last.
  std::deque<double> demand_lags_;  // Most recent first.
  std::deque<double> qps_lags_;
  bool has_sample_ = false;
  absl::Time last_time_;
  absl::Duration step_ = absl::Minutes(1);  // Typical sample spacing.
  double demand_ = 0;        // Replica-equivalents busy in the latest sample.
  double qps_ = 0;
  double level_demand_ = 0;  // EWMAs.
  double level_qps_ = 0;
  double service_time_s_ = 0;  // Load model: busy replica-seconds per request.
  int64_t samples_ = 0;
  std::deque<int> recent_;  // Recent unstabilised recommendations.
  // With a start-up delay: the features and forecast made for a future time, oldest first,
  // learnt from once a sample at that time arrives.
  struct Ahead {
    absl::Time time;
    Eigen::VectorXd features;
    double forecast = 0;
  };
  std::deque<Ahead> ahead_;
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_EVOSCALE_POLICY_H_
