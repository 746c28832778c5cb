#include "service/autoscaler/autoscaler_core.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/time_util.h"
#include "load_model/replica_load_window.h"
#include "service/autoscaler/internal/recommenders.h"
#include "service/autoscaler/internal/sample_check.h"
#include "service/autoscaler/internal/usage_history.h"
#include "service/autoscaler/internal/workload_check.h"

namespace evoscale::service {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;
using ::absl::StrFormat;

namespace {

using ::google::protobuf::util::TimeUtil;

double ToUnixSecondsDouble(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }
google::protobuf::Timestamp ToTimestamp(double unix_seconds) {
  return TimeUtil::NanosecondsToTimestamp(std::llround(unix_seconds * 1e9));
}

// How a series is named in messages: `instance "pod-1"`, `instance "pod-1" container "app"`.
std::string SeriesName(const std::string& instance, const std::string& container) {
  return container.empty() ? StrCat("instance \"", instance, "\"")
                           : StrCat("instance \"", instance, "\" container \"", container, "\"");
}

internal::RecommendationSnapshot SnapshotOf(const v1::Recommendation& r) {
  return {.cpu_target = r.cpu_cores().target(),
          .cpu_lower = r.cpu_cores().lower_bound(),
          .cpu_upper = r.cpu_cores().upper_bound(),
          .cpu_limit = r.cpu_cores().limit(),
          .memory_target = r.memory_bytes().target(),
          .memory_lower = r.memory_bytes().lower_bound(),
          .memory_upper = r.memory_bytes().upper_bound(),
          .memory_limit = r.memory_bytes().limit(),
          .replicas = r.replicas()};
}

void SetRecommendation(const std::optional<internal::RecommendationSnapshot>& r,
                       WorkloadHistoryBucket* b) {
  b->has_recommendation = r.has_value();
  if (!r.has_value()) return;
  b->cpu_target = r->cpu_target;
  b->cpu_lower = r->cpu_lower;
  b->cpu_upper = r->cpu_upper;
  b->cpu_limit = r->cpu_limit;
  b->memory_target = r->memory_target;
  b->memory_lower = r->memory_lower;
  b->memory_upper = r->memory_upper;
  b->memory_limit = r->memory_limit;
  b->replicas = r->replicas;
}

// `buckets` as History answers them, `newest` standing for the last one's recommendation:
// merged, when there are more than `max_points` > 0, into intervals of the fewest whole
// minutes (aligned to multiples of their width) that leave at most `max_points`.
WorkloadHistory MergedHistory(const std::deque<internal::UsageBucket>& buckets,
                              const std::optional<internal::RecommendationSnapshot>& newest,
                              int max_points) {
  auto recommendation = [&](size_t i) -> const std::optional<internal::RecommendationSnapshot>& {
    return i + 1 == buckets.size() ? newest : buckets[i].recommendation;
  };
  auto minute = [&](size_t i) {
    return std::llround(buckets[i].start / internal::kHistoryBucketSeconds);
  };
  int64_t minutes = 1;
  if (max_points > 0 && buckets.size() > static_cast<size_t>(max_points)) {
    // Each interval holds at most `minutes` buckets, so fewer than size / max_points cannot do;
    // alignment may cost a few more.
    auto intervals = [&](int64_t width) {
      int64_t count = 0;
      for (size_t i = 0; i < buckets.size(); ++i) {
        count += i == 0 || minute(i) / width != minute(i - 1) / width;
      }
      return count;
    };
    minutes = (static_cast<int64_t>(buckets.size()) + max_points - 1) / max_points;
    while (intervals(minutes) > max_points) ++minutes;
  }
  WorkloadHistory out;
  out.bucket_seconds = static_cast<double>(minutes) * internal::kHistoryBucketSeconds;
  // Sums over the buckets of the interval being filled.
  int64_t pod_samples = 0;
  double cpu_sum = 0, qps_sum = 0, latency_sum = 0;
  int64_t latency_samples = 0;
  int merged = 0;
  auto finish = [&] {
    WorkloadHistoryBucket& b = out.buckets.back();
    b.cpu_cores_mean = pod_samples > 0 ? cpu_sum / static_cast<double>(pod_samples) : 0;
    b.qps = qps_sum / merged;
    b.latency_seconds =
        latency_samples > 0 ? latency_sum / static_cast<double>(latency_samples) : -1;
  };
  for (size_t i = 0; i < buckets.size(); ++i) {
    const internal::UsageBucket& u = buckets[i];
    const int64_t interval = minute(i) / minutes;
    if (i == 0 || interval != minute(i - 1) / minutes) {
      if (i > 0) finish();
      out.buckets.emplace_back().start = static_cast<double>(interval) * out.bucket_seconds;
      pod_samples = 0;
      cpu_sum = qps_sum = latency_sum = 0;
      latency_samples = 0;
      merged = 0;
    }
    WorkloadHistoryBucket& b = out.buckets.back();
    b.instances = std::max(b.instances, u.instances);
    b.cpu_cores_max = std::max(b.cpu_cores_max, u.cpu_max);
    b.memory_bytes_max = std::max(b.memory_bytes_max, u.memory_max);
    pod_samples += u.pod_samples;
    cpu_sum += u.cpu_sum;
    latency_sum += u.latency_sum;
    latency_samples += u.latency_samples;
    // The bucket's offered load: mean QPS per pod sample, times the instances reporting.
    qps_sum += u.pod_samples > 0 ? u.qps_sum / static_cast<double>(u.pod_samples) * u.instances : 0;
    ++merged;
    SetRecommendation(recommendation(i), &b);
  }
  if (!out.buckets.empty()) finish();
  return out;
}

}  // namespace

struct AutoscalerCore::WorkloadState {
  // (instance, container): samples are ordered, and stored, per series.
  using SeriesKey = std::pair<std::string, std::string>;
  struct Series {
    int64_t id = 0;  // the store's instance row
    double last_timestamp = -std::numeric_limits<double>::infinity();
  };
  // One container's load models, fed with that container's samples from every instance.
  struct Container {
    std::unique_ptr<load_model::ResourceRecommender> resources;  // CPU and memory
    // GPU memory as "memory"; null until the container reports some.
    std::unique_ptr<load_model::ResourceRecommender> gpu_memory;
    double newest_timestamp = 0;
  };

  int64_t id = 0;
  v1::Workload workload;
  int64_t sample_count = 0;
  absl::flat_hash_map<SeriesKey, Series> series;
  std::map<std::string, Container> containers;  // by name; "" for samples that name none
  // Instance names as the replica window counts them (its containers are one replica); numbers
  // are never reused, so a forgotten instance's cannot merge with a new one's.
  absl::flat_hash_map<std::string, int64_t> instance_numbers;
  int64_t next_instance_number = 0;
  std::unique_ptr<load_model::ReplicaRecommender> replicas;
  double newest_timestamp = 0;

  load_model::ReplicaLoadWindow window{kLoadWindowSeconds};
  load_model::ReplicaRecommendation last_replicas;
  int current_replicas = 0;

  // Usage and recommendations of the last day, for charts; kept across policy changes.
  internal::UsageHistory history;

  Container& ContainerNamed(const std::string& name) {
    auto [it, inserted] = containers.try_emplace(name);
    if (inserted) it->second.resources = MakeResourceRecommender(workload);
    return it->second;
  }

  // Whether `c` still counts: it has reported within kStaleContainerSeconds of the newest
  // sample of any container (a renamed or removed container drops out of the sums).
  bool Live(const Container& c) const {
    return c.newest_timestamp >= newest_timestamp - kStaleContainerSeconds;
  }

  // One instance's CPU request at `at`: its live containers' targets, summed.
  double InstanceCpuTarget(absl::Time at) {
    double cores = 0;
    for (auto& [name, c] : containers) {
      if (Live(c)) cores += c.resources->Peek(at).cpu_cores.target;
    }
    return cores;
  }

  void Feed(const TelemetryRow& r, const SeriesKey& key) {
    // Before the models take the sample: a history bucket it closes keeps the recommendation
    // that stood until now, computed once per bucket.
    history.Add(key.first, r.timestamp, r.cpu_cores, r.memory_bytes, r.qps, r.latency_ms / 1000,
                [this] { return ClosingSnapshot(); });
    if (!r.versions.empty()) history.SetVersions(key.first, r.timestamp, r.versions);
    const absl::Time t = absl::FromUnixSeconds(0) + absl::Seconds(r.timestamp);
    Container& c = ContainerNamed(key.second);
    load_model::UsageSample u;
    u.time = t;
    u.cpu_cores = r.cpu_cores;
    u.memory_bytes = r.memory_bytes;
    u.load = r.qps > 0 ? r.qps : -1;
    c.resources->AddSample(u);
    if (r.oom) c.resources->RecordOom(t, r.memory_bytes);
    if (r.gpu_memory_bytes > 0) {
      if (c.gpu_memory == nullptr) c.gpu_memory = MakeResourceRecommender(workload);
      load_model::UsageSample g;
      g.time = t;
      g.memory_bytes = r.gpu_memory_bytes;
      c.gpu_memory->AddSample(g);
    }
    c.newest_timestamp = std::max(c.newest_timestamp, r.timestamp);
    newest_timestamp = std::max(newest_timestamp, r.timestamp);
    ++sample_count;

    auto [number, added] = instance_numbers.try_emplace(key.first, next_instance_number);
    if (added) ++next_instance_number;
    const int64_t instance = number->second;
    const load_model::InstanceSample sample{.instance = instance,
                                            .timestamp = r.timestamp,
                                            .cpu_cores = r.cpu_cores,
                                            .qps = r.qps,
                                            .gpu_utilization = r.gpu_utilization,
                                            .latency_ms = r.latency_ms,
                                            .cpu_request_cores = r.cpu_request_cores};
    std::optional<load_model::LoadSample> closed =
        window.Add(sample, [this](absl::Time at) { return InstanceCpuTarget(at); });
    if (closed.has_value()) {
      replicas->AddSample(*closed);
      current_replicas = closed->replicas;
      last_replicas = replicas->Recommend(closed->time, closed->replicas);
    }
  }

  // Drops the series whose ids are in `ids` (their store rows are gone), and the numbers of
  // instances left with no series.
  void Forget(const absl::flat_hash_set<int64_t>& ids) {
    bool any = false;
    for (auto it = series.begin(); it != series.end();) {
      if (ids.contains(it->second.id)) {
        series.erase(it++);
        any = true;
      } else {
        ++it;
      }
    }
    if (!any) return;
    absl::flat_hash_set<std::string> named;
    for (const auto& [key, s] : series) named.insert(key.first);
    absl::erase_if(instance_numbers, [&](const auto& kv) { return !named.contains(kv.first); });
  }

  // GetRecommendation's answer at `now`: as of the newest sample when telemetry is
  // historical (a replayed trace).
  absl::StatusOr<v1::Recommendation> Current(absl::Time now) {
    // Nothing to recommend from yet: say so, rather than answer the models' empty defaults.
    if (sample_count == 0) {
      return absl::FailedPreconditionError(
          StrCat("workload \"", workload.name(),
                 "\" has no samples yet: report its telemetry first (ReportTelemetry)"));
    }
    return Recommendation(
        std::min(now, absl::FromUnixSeconds(0) + absl::Seconds(newest_timestamp)));
  }

  // The recommendation as of the newest sample, for the history bucket that closes now; the
  // same on live ingest and on replay.
  std::optional<internal::RecommendationSnapshot> ClosingSnapshot() {
    absl::StatusOr<v1::Recommendation> r =
        Current(absl::FromUnixSeconds(0) + absl::Seconds(newest_timestamp));
    if (!r.ok()) return std::nullopt;
    return SnapshotOf(*r);
  }

  // Per live container, and their sums: what one instance needs.
  v1::Recommendation Recommendation(absl::Time now) {
    v1::Recommendation out;
    out.set_workload(workload.name());
    out.set_policy(std::string(load_model::PolicyName(PolicyOf(workload))));
    auto set = [](const load_model::ResourceEstimate& e, v1::ResourceBounds* b) {
      b->set_target(e.target);
      b->set_lower_bound(e.lower_bound);
      b->set_upper_bound(e.upper_bound);
      b->set_limit(load_model::LimitOf(e));
    };
    auto add = [](const load_model::ResourceEstimate& e, v1::ResourceBounds* sum) {
      sum->set_target(sum->target() + e.target);
      sum->set_lower_bound(sum->lower_bound() + e.lower_bound);
      sum->set_upper_bound(sum->upper_bound() + e.upper_bound);
      sum->set_limit(sum->limit() + load_model::LimitOf(e));
    };
    std::vector<std::pair<const std::string*, Container*>> live;
    for (auto& [name, c] : containers) {
      if (Live(c)) live.emplace_back(&name, &c);
    }
    double days = std::numeric_limits<double>::infinity();
    std::string explanation;
    for (const auto& [name, c] : live) {
      const load_model::ResourceRecommendation r = c->resources->Peek(now);
      v1::ContainerRecommendation* container = out.add_containers();
      container->set_name(*name);
      set(r.cpu_cores, container->mutable_cpu_cores());
      set(r.memory_bytes, container->mutable_memory_bytes());
      add(r.cpu_cores, out.mutable_cpu_cores());
      add(r.memory_bytes, out.mutable_memory_bytes());
      if (c->gpu_memory != nullptr) {
        const load_model::ResourceEstimate gpu = c->gpu_memory->Peek(now).memory_bytes;
        set(gpu, container->mutable_gpu_memory_bytes());
        add(gpu, out.mutable_gpu_memory_bytes());
      }
      days = std::min(days, r.confidence);
      if (r.explanation.empty()) continue;
      absl::StrAppend(&explanation, explanation.empty() ? "" : "; ");
      if (live.size() > 1) absl::StrAppend(&explanation, name->empty() ? "(unnamed)" : *name, ": ");
      absl::StrAppend(&explanation, r.explanation);
    }
    int replicas = last_replicas.replicas > 0 ? last_replicas.replicas : current_replicas;
    if (workload.min_replicas() > 0) replicas = std::max(replicas, workload.min_replicas());
    if (workload.max_replicas() > 0) replicas = std::min(replicas, workload.max_replicas());
    out.set_replicas(replicas);
    // Confidence in [0, 1]: a week of evidence is full confidence.
    out.set_confidence(live.empty() ? 0 : std::min(1.0, days / 7.0));
    if (!last_replicas.explanation.empty()) {
      absl::StrAppend(&explanation, explanation.empty() ? "" : "; ", last_replicas.explanation);
    }
    out.set_explanation(explanation);
    *out.mutable_newest_sample_time() = ToTimestamp(newest_timestamp);
    return out;
  }
};

AutoscalerCore::AutoscalerCore(TelemetryStore* store, Clock* clock, RetentionPolicy retention)
    : store_(store), clock_(clock), retention_(retention) {}

AutoscalerCore::~AutoscalerCore() = default;

absl::StatusOr<std::unique_ptr<AutoscalerCore>> AutoscalerCore::Create(TelemetryStore* store,
                                                                       Clock* clock,
                                                                       RetentionPolicy retention) {
  std::unique_ptr<AutoscalerCore> core(new AutoscalerCore(store, clock, retention));
  if (absl::Status st = core->Load(); !st.ok()) return st;
  return core;
}

std::unique_ptr<AutoscalerCore::WorkloadState> AutoscalerCore::NewState(int64_t id,
                                                                        const v1::Workload& w) {
  auto s = std::make_unique<WorkloadState>();
  s->id = id;
  s->workload = w;
  s->replicas = MakeReplicaRecommender(w);
  return s;
}

struct AutoscalerCore::SeriesOwner {
  WorkloadState* state;
  const WorkloadState::SeriesKey* key;
  WorkloadState::Series* series;
};

absl::Status AutoscalerCore::Load() {
  absl::StatusOr<std::vector<StoredWorkload>> workloads = store_->LoadWorkloads();
  if (!workloads.ok()) return workloads.status();
  absl::StatusOr<std::vector<StoredInstance>> instances = store_->LoadInstances();
  if (!instances.ok()) return instances.status();
  absl::MutexLock lock(&mu_);
  for (const StoredWorkload& w : *workloads) {
    next_workload_id_ = std::max(next_workload_id_, w.id + 1);
    workloads_[w.workload.name()] = NewState(w.id, w.workload);
  }
  ApplyInstances(*instances);
  // Every series is in place: the pointers below stay valid while the samples are fed.
  const absl::flat_hash_map<int64_t, SeriesOwner> owner_by_id = SeriesById();
  return store_->ScanSamples([&](const TelemetryRow& r) {
    auto it = owner_by_id.find(r.instance_id);
    if (it == owner_by_id.end()) return;
    const SeriesOwner& o = it->second;
    o.state->Feed(r, *o.key);
    o.series->last_timestamp = std::max(o.series->last_timestamp, r.timestamp);
  });
}

void AutoscalerCore::ApplyInstances(absl::Span<const StoredInstance> instances) {
  if (instances.empty()) return;
  absl::flat_hash_map<int64_t, WorkloadState*> by_id;
  for (const auto& [name, state] : workloads_) by_id[state->id] = state.get();
  for (const StoredInstance& in : instances) {
    auto it = by_id.find(in.workload_id);
    if (it == by_id.end()) continue;  // a workload dropped meanwhile (a foreign key in one store)
    it->second->series[{in.name, in.container}].id = in.id;
    next_instance_id_ = std::max(next_instance_id_, in.id + 1);
  }
}

absl::flat_hash_map<int64_t, AutoscalerCore::SeriesOwner> AutoscalerCore::SeriesById() {
  absl::flat_hash_map<int64_t, SeriesOwner> owners;
  for (const auto& [name, state] : workloads_) {
    for (auto& [key, series] : state->series) owners[series.id] = {state.get(), &key, &series};
  }
  return owners;
}

absl::StatusOr<v1::Workload> AutoscalerCore::PutWorkload(const v1::PutWorkloadRequest& req) {
  if (absl::Status st = CheckWorkload(req.workload()); !st.ok()) return st;
  absl::MutexLock writer(&write_mu_);
  int64_t id;
  {
    absl::MutexLock lock(&mu_);
    auto it = workloads_.find(req.workload().name());
    id = it != workloads_.end() ? it->second->id : next_workload_id_;
  }
  // The store is written with only write_mu_ held: readers of mu_ do not wait for SQLite. A
  // shared store answers its own id (another replica may have made the workload).
  absl::StatusOr<int64_t> stored = store_->PutWorkload(id, req.workload());
  if (!stored.ok()) return stored.status();
  absl::MutexLock lock(&mu_);
  WorkloadState* w = ApplyWorkload(*stored, req.workload());
  v1::Workload out = w->workload;
  out.set_sample_count(w->sample_count);
  return out;
}

AutoscalerCore::WorkloadState* AutoscalerCore::ApplyWorkload(int64_t id, const v1::Workload& w) {
  auto it = workloads_.find(w.name());
  if (it == workloads_.end()) {
    next_workload_id_ = std::max(next_workload_id_, id + 1);
    return workloads_.emplace(w.name(), NewState(id, w)).first->second.get();
  }
  if (PolicyOf(it->second->workload) != PolicyOf(w)) {
    // A new policy starts from the workload's history, as after a restart.
    auto fresh = NewState(id, w);
    fresh->series = std::move(it->second->series);
    fresh->history = std::move(it->second->history);
    it->second = std::move(fresh);
    ++version_;
  } else {
    it->second->workload = w;
  }
  return it->second.get();
}

absl::StatusOr<v1::Workload> AutoscalerCore::GetWorkload(const v1::GetWorkloadRequest& req) {
  CatchUp();
  absl::MutexLock lock(&mu_);
  auto it = workloads_.find(req.name());
  if (it == workloads_.end()) {
    return absl::NotFoundError(StrCat("workload \"", req.name(), "\" not found"));
  }
  v1::Workload out = it->second->workload;
  out.set_sample_count(it->second->sample_count);
  return out;
}

v1::ListWorkloadsResponse AutoscalerCore::ListWorkloads() {
  CatchUp();
  absl::MutexLock lock(&mu_);
  v1::ListWorkloadsResponse resp;
  for (const auto& [name, s] : workloads_) {
    v1::Workload* w = resp.add_workloads();
    *w = s->workload;
    w->set_sample_count(s->sample_count);
  }
  return resp;
}


// What one batch will do once stored: its accepted rows, the series it creates, the newest
// timestamp of each series it touches, and its rejections.
struct AutoscalerCore::IngestPlan {
  std::vector<TelemetryRow> rows;  // rows[i].instance_id is a key of `touched`
  std::vector<StoredInstance> new_instances;
  struct Touched {
    WorkloadState* workload;
    WorkloadState::SeriesKey key;
    double last_timestamp;
  };
  absl::flat_hash_map<int64_t, Touched> touched;  // by series id
  absl::flat_hash_map<std::pair<WorkloadState*, WorkloadState::SeriesKey>, int64_t> new_ids;
  // Containers its samples name that their workloads do not have yet.
  absl::flat_hash_map<WorkloadState*, absl::flat_hash_set<std::string>> new_containers;
  std::map<std::string, int64_t> rejected;  // by reason
  int64_t next_instance_id = 0;
};

AutoscalerCore::IngestPlan AutoscalerCore::PlanIngest(const v1::TelemetryBatch& batch,
                                                      double now,
                                                      v1::ReportTelemetryResponse* resp) {
  IngestPlan plan;
  plan.rows.reserve(batch.samples_size());
  plan.next_instance_id = next_instance_id_;
  for (int i = 0; i < batch.samples_size(); ++i) {
    const v1::TelemetrySample& s = batch.samples(i);
    auto reject = [&](const char* reason, const std::string& msg) {
      ++plan.rejected[reason];
      if (resp->errors_size() < kMaxReportedErrors) {
        resp->add_errors(StrFormat("samples[%d]: %s", i, msg));
      }
    };
    auto wit = workloads_.find(s.workload());
    if (wit == workloads_.end()) {
      reject("unknown_workload", StrCat("workload: unknown workload \"", s.workload(),
                                        "\"; create it with PutWorkload"));
      continue;
    }
    if (std::optional<SampleRejection> bad = CheckSampleFields(s, now); bad.has_value()) {
      reject(bad->reason, bad->message);
      continue;
    }
    WorkloadState* w = wit->second.get();
    if (!w->containers.contains(s.container())) {
      absl::flat_hash_set<std::string>& added = plan.new_containers[w];
      if (!added.contains(s.container()) &&
          w->containers.size() + added.size() >= kMaxContainersPerWorkload) {
        reject("too_many_containers",
               StrCat("container: \"", s.container(), "\" would be one more than the ",
                      kMaxContainersPerWorkload, " container names a workload may have"));
        continue;
      }
      added.insert(s.container());
    }
    WorkloadState::SeriesKey key{s.instance(), s.container()};
    int64_t series_id;
    double last = -std::numeric_limits<double>::infinity();
    if (auto sit = w->series.find(key); sit != w->series.end()) {
      series_id = sit->second.id;
      last = sit->second.last_timestamp;
    } else {
      auto [nit, inserted] = plan.new_ids.try_emplace({w, key}, plan.next_instance_id);
      if (inserted) {
        plan.new_instances.push_back({plan.next_instance_id, w->id, s.instance(), s.container()});
        ++plan.next_instance_id;
      }
      series_id = nit->second;
    }
    auto [tit, first_touch] =
        plan.touched.try_emplace(series_id, IngestPlan::Touched{w, std::move(key), last});
    last = tit->second.last_timestamp;
    const double t = ToUnixSecondsDouble(s.time());
    if (t == last) {
      reject("duplicate",
             StrCat("time: ", TimeUtil::ToString(s.time()), " repeats the last sample of ",
                    SeriesName(s.instance(), s.container())));
      continue;
    }
    if (t < last) {
      reject("out_of_order",
             StrCat("time: ", TimeUtil::ToString(s.time()), " is older than the last sample ",
                    TimeUtil::ToString(ToTimestamp(last)), " of ",
                    SeriesName(s.instance(), s.container())));
      continue;
    }
    tit->second.last_timestamp = t;
    plan.rows.push_back(ToRow(s, series_id));
  }
  return plan;
}

void AutoscalerCore::ApplyIngest(const IngestPlan& plan, absl::Span<const int64_t> stored_ids,
                                 v1::ReportTelemetryResponse* resp) {
  next_instance_id_ = plan.next_instance_id;
  // A shared store may give a new series another id than the plan's.
  absl::flat_hash_map<int64_t, int64_t> stored_id;
  for (size_t i = 0; i < plan.new_instances.size() && i < stored_ids.size(); ++i) {
    stored_id[plan.new_instances[i].id] = stored_ids[i];
    next_instance_id_ = std::max(next_instance_id_, stored_ids[i] + 1);
  }
  for (const auto& [id, t] : plan.touched) {
    WorkloadState::Series& series = t.workload->series[t.key];
    auto stored = stored_id.find(id);
    series.id = stored != stored_id.end() ? stored->second : id;
    series.last_timestamp = t.last_timestamp;
  }
  for (const TelemetryRow& row : plan.rows) {
    const IngestPlan::Touched& t = plan.touched.at(row.instance_id);
    t.workload->Feed(row, t.key);
  }
  int64_t rejected_count = 0;
  for (const auto& [reason, n] : plan.rejected) {
    (*resp->mutable_rejected_by_reason())[reason] += n;
    rejected_total_[reason] += n;
    rejected_count += n;
  }
  const int64_t accepted = static_cast<int64_t>(plan.rows.size());
  resp->set_accepted(resp->accepted() + accepted);
  resp->set_rejected(resp->rejected() + rejected_count);
  accepted_total_ += accepted;
  if (accepted > 0) ++version_;
}

absl::Status AutoscalerCore::Ingest(const v1::TelemetryBatch& batch,
                                    v1::ReportTelemetryResponse* resp) {
  if (batch.samples_size() > kMaxSamplesPerBatch) {
    return InvalidArgumentError(StrFormat("samples: %d samples in one batch; at most %d",
                                          batch.samples_size(), kMaxSamplesPerBatch));
  }
  const double now = ToUnixSecondsDouble(clock_->Now());
  // Writers take write_mu_ for the whole ingest, so batches apply in the order they were
  // planned; mu_ is held to plan and to apply, never across the SQLite write.
  absl::MutexLock writer(&write_mu_);
  // Others' samples first, so that this batch is checked against the newest of each series.
  CatchUpLocked().IgnoreError();
  IngestPlan plan;
  {
    absl::MutexLock lock(&mu_);
    plan = PlanIngest(batch, now, resp);
  }
  absl::StatusOr<std::vector<int64_t>> stored_ids = store_->Append(plan.new_instances, plan.rows);
  if (!stored_ids.ok()) return stored_ids.status();
  {
    absl::MutexLock lock(&mu_);
    ApplyIngest(plan, *stored_ids, resp);
  }
  if (++ingests_since_compact_ >= 256) {
    ingests_since_compact_ = 0;
    CompactLocked(now).IgnoreError();  // retried at the next interval
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::Recommendation> AutoscalerCore::GetRecommendation(
    const v1::GetRecommendationRequest& req) {
  CatchUp();
  return RecommendationOf(req.workload(), clock_->Now());
}

absl::StatusOr<v1::Recommendation> AutoscalerCore::RecommendationOf(const std::string& workload,
                                                                    absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = workloads_.find(workload);
  if (it == workloads_.end()) {
    return absl::NotFoundError(StrCat("workload \"", workload, "\" not found"));
  }
  return it->second->Current(now);
}

absl::StatusOr<WorkloadHistory> AutoscalerCore::History(absl::string_view workload,
                                                        int max_points) {
  if (max_points < 0) {
    return InvalidArgumentError(
        StrCat("max_points: ", max_points, " is negative (0 for every bucket)"));
  }
  CatchUp();
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  auto it = workloads_.find(std::string(workload));
  if (it == workloads_.end()) {
    return absl::NotFoundError(StrCat("workload \"", workload, "\" not found"));
  }
  WorkloadState& w = *it->second;
  std::optional<internal::RecommendationSnapshot> newest;
  if (!w.history.buckets().empty()) {
    if (absl::StatusOr<v1::Recommendation> r = w.Current(now); r.ok()) newest = SnapshotOf(*r);
  }
  WorkloadHistory out = MergedHistory(w.history.buckets(), newest, max_points);
  for (const auto& [name, series] :
       w.history.NewestInstances(kInstancesNowSeconds, kMaxInstancesNow)) {
    out.instances.push_back({.instance = *name,
                             .time = series->last_time(),
                             .versions = series->versions(),
                             .versions_time = series->versions_time()});
  }
  return out;
}

absl::StatusOr<std::vector<UsagePoint>> AutoscalerCore::InstanceHistory(absl::string_view workload,
                                                                        absl::string_view instance,
                                                                        int max_points) {
  if (max_points < 0) {
    return InvalidArgumentError(
        StrCat("max_points: ", max_points, " is negative (0 for every point)"));
  }
  CatchUp();
  absl::MutexLock lock(&mu_);
  auto it = workloads_.find(std::string(workload));
  if (it == workloads_.end()) {
    return absl::NotFoundError(StrCat("workload \"", workload, "\" not found"));
  }
  const internal::InstanceSeries* series = it->second->history.instance(instance);
  if (series == nullptr) {
    return absl::NotFoundError(StrCat("instance \"", instance, "\" of workload \"", workload,
                                      "\" not found in its usage history"));
  }
  std::vector<UsagePoint> out;
  for (const internal::PodSample& p : series->Points(max_points)) {
    out.push_back({.time = p.time, .cpu_cores = p.cpu_cores, .memory_bytes = p.memory_bytes});
  }
  return out;
}

std::vector<v1::Recommendation> AutoscalerCore::AllRecommendations() {
  CatchUp();
  const absl::Time now = clock_->Now();
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, w] : workloads_) names.push_back(name);
  }
  std::vector<v1::Recommendation> out;
  for (const std::string& name : names) {
    if (absl::StatusOr<v1::Recommendation> r = RecommendationOf(name, now); r.ok()) {
      out.push_back(*std::move(r));
    }
  }
  return out;
}

uint64_t AutoscalerCore::version() {
  absl::MutexLock lock(&mu_);
  return version_;
}

uint64_t AutoscalerCore::AwaitChange(uint64_t seen, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  const uint64_t interrupts = interrupts_;
  auto changed = [this, seen, interrupts]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return version_ > seen || interrupts_ != interrupts;
  };
  mu_.AwaitWithDeadline(absl::Condition(&changed), deadline);
  return version_;
}

void AutoscalerCore::Interrupt() {
  absl::MutexLock lock(&mu_);
  ++interrupts_;
}

absl::StatusOr<int64_t> AutoscalerCore::Compact() {
  absl::MutexLock writer(&write_mu_);
  return CompactLocked(ToUnixSecondsDouble(clock_->Now()));
}

absl::StatusOr<int64_t> AutoscalerCore::CompactLocked(double now) {
  // One replica of those sharing a database compacts; a dead leader's lease goes to the next
  // replica that asks here. The others forget the same silent series (below) in memory only:
  // their rows are the leader's to drop.
  absl::StatusOr<bool> leader = store_->TakeChoreLease();
  if (!leader.ok()) return leader.status();
  // A series whose newest sample is older than the bucket retention has no row left once the
  // store has compacted: it goes, with its instance row, so that pod churn does not grow the
  // store and the core without bound. Also by the workload's own newest sample, so that the
  // live series of a replayed trace (old by the clock) stay and keep their ids.
  const double retention = retention_.bucket_retention_seconds;
  std::vector<int64_t> silent;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, w] : workloads_) {
      const double before = std::min(now, w->newest_timestamp) - retention;
      for (const auto& [key, series] : w->series) {
        if (series.last_timestamp < before) silent.push_back(series.id);
      }
    }
  }
  absl::StatusOr<int64_t> removed =
      *leader ? store_->Compact(retention_, now, silent) : absl::StatusOr<int64_t>(0);
  if (!removed.ok() || silent.empty()) return removed;
  // Ingest and PutWorkload wait for write_mu_: the series are as they were above.
  const absl::flat_hash_set<int64_t> ids(silent.begin(), silent.end());
  absl::MutexLock lock(&mu_);
  for (auto& [name, w] : workloads_) w->Forget(ids);
  return removed;
}

void AutoscalerCore::CatchUp() {
  if (!store_->shared()) return;
  absl::MutexLock writer(&write_mu_);
  CatchUpLocked().IgnoreError();  // answered from what this replica has; read again next time
}

absl::Status AutoscalerCore::CatchUpLocked() {
  if (!store_->shared()) return absl::OkStatus();
  for (;;) {
    absl::StatusOr<TelemetryChanges> changes = store_->ReadChanges();
    if (!changes.ok()) return changes.status();
    ApplyChanges(*changes);
    if (!changes->more) return absl::OkStatus();
  }
}

void AutoscalerCore::ApplyChanges(const TelemetryChanges& changes) {
  absl::MutexLock lock(&mu_);
  for (const StoredWorkload& w : changes.workloads) ApplyWorkload(w.id, w.workload);
  // A series known here under another id (its row was dropped and registered again) takes the
  // store's.
  ApplyInstances(changes.instances);
  if (changes.rows.empty()) return;
  const absl::flat_hash_map<int64_t, SeriesOwner> owner_by_id = SeriesById();
  bool fed = false;
  for (const TelemetryRow& r : changes.rows) {
    auto it = owner_by_id.find(r.instance_id);
    if (it == owner_by_id.end()) continue;
    const SeriesOwner& o = it->second;
    // This replica's own rows come back too; they, and another replica's sample older than
    // this series' newest here, are skipped (the models take each series in time order).
    if (r.timestamp <= o.series->last_timestamp) continue;
    o.state->Feed(r, *o.key);
    o.series->last_timestamp = r.timestamp;
    fed = true;
  }
  if (fed) ++version_;
}

absl::Status AutoscalerCore::IngestTrialUsage(const v1::TelemetrySample& sample) {
  absl::Status st = [&]() -> absl::Status {
    v1::GetWorkloadRequest get;
    get.set_name(sample.workload());
    absl::StatusOr<v1::Workload> known = GetWorkload(get);
    if (absl::IsNotFound(known.status())) {
      v1::PutWorkloadRequest put;
      put.mutable_workload()->set_name(sample.workload());
      put.mutable_workload()->set_kind(v1::Workload::TRAINING);
      // PutWorkload creates or replaces: two trials racing here put the same workload.
      if (absl::StatusOr<v1::Workload> made = PutWorkload(put); !made.ok()) return made.status();
    } else if (!known.ok()) {
      return known.status();
    }
    v1::TelemetryBatch batch;
    *batch.add_samples() = sample;
    v1::ReportTelemetryResponse resp;
    if (absl::Status ingested = Ingest(batch, &resp); !ingested.ok()) return ingested;
    if (resp.rejected() > 0) {
      return InvalidArgumentError(StrCat("trial usage sample rejected: ",
                                         resp.errors().empty() ? "" : resp.errors(0)));
    }
    return absl::OkStatus();
  }();
  if (!st.ok()) ++trial_usage_errors_;
  return st;
}

int64_t AutoscalerCore::series_count() {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [name, w] : workloads_) n += static_cast<int64_t>(w->series.size());
  return n;
}

int64_t AutoscalerCore::accepted_total() {
  absl::MutexLock lock(&mu_);
  return accepted_total_;
}

std::map<std::string, int64_t> AutoscalerCore::rejected_by_reason_total() {
  absl::MutexLock lock(&mu_);
  return rejected_total_;
}

}  // namespace evoscale::service
