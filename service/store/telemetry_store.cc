#include "service/store/telemetry_store.h"

#include <bit>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/unknown_field_set.h"
#include "service/store/internal/telemetry_backend.h"

namespace evoscale::service {
namespace {

// Fields of a stored Workload that an older evoscaled wrote and this one reads otherwise. The
// record is a protobuf, so a removed field survives as an unknown field until then.
void UpgradeWorkload(v1::Workload* w) {
  constexpr int kLatencySloMs = 7;  // double latency_slo_ms, now latency_slo_seconds
  google::protobuf::UnknownFieldSet* unknown = w->GetReflection()->MutableUnknownFields(w);
  for (int i = unknown->field_count() - 1; i >= 0; --i) {
    const google::protobuf::UnknownField& f = unknown->field(i);
    if (f.number() != kLatencySloMs) continue;
    if (f.type() == google::protobuf::UnknownField::TYPE_FIXED64 && w->latency_slo_seconds() == 0) {
      w->set_latency_slo_seconds(std::bit_cast<double>(f.fixed64()) / 1000);
    }
    unknown->DeleteSubrange(i, 1);
  }
}

absl::StatusOr<std::vector<StoredWorkload>> ParseWorkloads(
    std::vector<internal::WorkloadRecord> records) {
  std::vector<StoredWorkload> out;
  out.reserve(records.size());
  for (internal::WorkloadRecord& r : records) {
    StoredWorkload w;
    w.id = r.id;
    if (!w.workload.ParseFromString(r.body)) {
      return absl::DataLossError(absl::StrCat("workload ", w.id, ": unreadable record"));
    }
    UpgradeWorkload(&w.workload);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TelemetryStore>> TelemetryStore::Open(const std::string& database,
                                                                     Durability durability,
                                                                     bool accept_damaged_wal) {
  absl::StatusOr<std::unique_ptr<internal::TelemetryBackend>> backend =
      Store::IsPostgres(database)
          ? internal::OpenPostgresTelemetry(database, durability)
          : internal::OpenSqliteTelemetry(database, durability, accept_damaged_wal);
  if (!backend.ok()) return backend.status();
  std::unique_ptr<TelemetryStore> store(new TelemetryStore(*std::move(backend)));
  // The first replica up leads at once; the others ask again before each compaction.
  store->TakeChoreLease().IgnoreError();
  return store;
}

TelemetryStore::TelemetryStore(std::unique_ptr<internal::TelemetryBackend> backend)
    : backend_(std::move(backend)) {}

TelemetryStore::~TelemetryStore() = default;

absl::StatusOr<int64_t> TelemetryStore::PutWorkload(int64_t id, const v1::Workload& workload) {
  v1::Workload copy = workload;
  copy.clear_sample_count();
  const std::string body = copy.SerializeAsString();
  absl::MutexLock lock(&mu_);
  return backend_->PutWorkload(id, workload.name(), body);
}

absl::StatusOr<std::vector<int64_t>> TelemetryStore::Append(
    absl::Span<const StoredInstance> new_instances, absl::Span<const TelemetryRow> rows) {
  if (new_instances.empty() && rows.empty()) return std::vector<int64_t>{};
  absl::MutexLock lock(&mu_);
  return backend_->Append(new_instances, rows);
}

absl::StatusOr<int64_t> TelemetryStore::Compact(const RetentionPolicy& policy, double now,
                                                absl::Span<const int64_t> drop_instances) {
  absl::MutexLock lock(&mu_);
  return backend_->Compact(policy, now, drop_instances);
}

absl::StatusOr<std::vector<StoredWorkload>> TelemetryStore::LoadWorkloads() {
  absl::StatusOr<std::vector<internal::WorkloadRecord>> records;
  {
    absl::MutexLock lock(&mu_);
    records = backend_->LoadWorkloads();
  }
  if (!records.ok()) return records.status();
  return ParseWorkloads(*std::move(records));
}

absl::StatusOr<std::vector<StoredInstance>> TelemetryStore::LoadInstances() {
  absl::MutexLock lock(&mu_);
  return backend_->LoadInstances();
}

absl::Status TelemetryStore::ScanSamples(const std::function<void(const TelemetryRow&)>& fn) {
  absl::MutexLock lock(&mu_);
  return backend_->ScanSamples(fn);
}

absl::StatusOr<int64_t> TelemetryStore::CountSamples() {
  absl::MutexLock lock(&mu_);
  return backend_->CountSamples();
}

int64_t TelemetryStore::checkpoint_failures() { return backend_->checkpoint_failures(); }

bool TelemetryStore::shared() const { return backend_->shared(); }

absl::StatusOr<TelemetryChanges> TelemetryStore::ReadChanges() {
  absl::StatusOr<internal::TelemetryRecords> records;
  {
    absl::MutexLock lock(&mu_);
    records = backend_->ReadChanges();
  }
  if (!records.ok()) return records.status();
  absl::StatusOr<std::vector<StoredWorkload>> workloads =
      ParseWorkloads(std::move(records->workloads));
  if (!workloads.ok()) return workloads.status();
  return TelemetryChanges{.workloads = *std::move(workloads),
                          .instances = std::move(records->instances),
                          .rows = std::move(records->rows),
                          .more = records->more};
}

absl::StatusOr<bool> TelemetryStore::TakeChoreLease() {
  absl::StatusOr<bool> held;
  {
    absl::MutexLock lock(&mu_);
    held = backend_->TakeChoreLease();
  }
  chore_leader_.store(held.ok() && *held);
  return held;
}

}  // namespace evoscale::service
