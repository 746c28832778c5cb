#include "service/study/internal/request_checks.h"

#include <algorithm>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "service/study/study_converter.h"
#include "service/study/study_limits.h"

namespace evoscale::service::internal {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;

namespace {

inline constexpr int kMaxMetadataKeys = 1000;
inline constexpr size_t kMaxMetadataValueBytes = 64 * 1024;

absl::Status ValidateMetadataKey(absl::string_view key, absl::string_view path) {
  if (key.empty() || key.size() > kMaxNameLength) {
    return InvalidArgumentError(absl::StrFormat("%s: key \"%s\" must be 1 to %d bytes", path,
                                                absl::CEscape(key.substr(0, 64)), kMaxNameLength));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateMetadata(const google::protobuf::Map<std::string, std::string>& m,
                              absl::string_view path) {
  if (m.size() > kMaxMetadataKeys) {
    return InvalidArgumentError(
        absl::StrFormat("%s: %d keys; at most %d", path, m.size(), kMaxMetadataKeys));
  }
  for (const auto& [key, value] : m) {
    if (absl::Status st = ValidateMetadataKey(key, path); !st.ok()) return st;
    if (value.size() > kMaxMetadataValueBytes) {
      return InvalidArgumentError(absl::StrFormat("%s[\"%s\"]: value of %d bytes; at most %d", path,
                                                  key, value.size(), kMaxMetadataValueBytes));
    }
  }
  return absl::OkStatus();
}

absl::Status UpdateMetadataMap(const v1::UpdateMetadataRequest& req,
                               google::protobuf::Map<std::string, std::string>* m) {
  for (const std::string& key : req.remove()) {
    if (absl::Status st = ValidateMetadataKey(key, "remove"); !st.ok()) return st;
    m->erase(key);
  }
  for (const auto& [key, value] : req.set()) (*m)[key] = value;
  return ValidateMetadata(*m, "set");
}

// The differencer's lines read "modified: PATH: OLD -> NEW"; the values may be long, the path is
// what a user needs.
std::string FirstDifference(const v1::StudySpec& existing, const v1::StudySpec& wanted) {
  std::string report;
  {
    google::protobuf::util::MessageDifferencer d;
    d.ReportDifferencesToString(&report);
    d.Compare(existing, wanted);
  }
  absl::string_view line = report;
  line = line.substr(0, line.find('\n'));
  const size_t colon = line.find(": ");
  if (colon == absl::string_view::npos) return "the specs differ";
  absl::string_view kind = line.substr(0, colon);
  absl::string_view path = line.substr(colon + 2);
  path = path.substr(0, std::min(path.find(": "), path.find(" ")));
  if (path.size() > 200) path = path.substr(0, 200);
  return absl::StrCat(path, " is ", kind);
}

absl::Status RequireMetrics(const search::ProblemStatement& problem, const v1::Measurement& m,
                            absl::string_view path) {
  for (const search::MetricConfig& metric : problem.metrics) {
    if (!m.metrics().contains(metric.name)) {
      return InvalidArgumentError(StrCat(path, ".metrics: missing metric \"", metric.name, "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status RequireSomeMetric(const search::ProblemStatement& problem, const v1::Measurement& m,
                               absl::string_view path) {
  std::vector<std::string> names;
  for (const search::MetricConfig& metric : problem.metrics) {
    if (m.metrics().contains(metric.name)) return absl::OkStatus();
    names.push_back(StrCat("\"", metric.name, "\""));
  }
  std::vector<std::string> given;
  for (const auto& [name, value] : m.metrics()) given.push_back(StrCat("\"", name, "\""));
  std::sort(given.begin(), given.end());
  return InvalidArgumentError(StrCat(path, ".metrics: ", absl::StrJoin(given, ", "),
                                     given.size() == 1 ? " is not a metric" : " are not metrics",
                                     " of the study (", absl::StrJoin(names, ", "), ")"));
}

const char* TrialStateName(v1::Trial::State s) { return v1::Trial::State_Name(s).c_str(); }

absl::StatusOr<v1::Trial> EndedTrial(const search::ProblemStatement& problem, const v1::Trial& in) {
  v1::Trial out;
  v1::Measurement fm = in.final_measurement();
  const bool has_final = fm.metrics_size() > 0;
  switch (in.state()) {
    case v1::Trial::STATE_UNSPECIFIED:
      out.set_state(has_final ? v1::Trial::SUCCEEDED : v1::Trial::REQUESTED);
      break;
    case v1::Trial::REQUESTED:
    case v1::Trial::ACTIVE:
    case v1::Trial::SUCCEEDED:
    case v1::Trial::STOPPED:
    case v1::Trial::INFEASIBLE:
      out.set_state(in.state());
      break;
    default:
      return InvalidArgumentError(absl::StrFormat(
          "trial.state: a trial is created REQUESTED, ACTIVE, SUCCEEDED, STOPPED or INFEASIBLE, "
          "not %s",
          v1::Trial::State_IsValid(in.state()) ? TrialStateName(in.state())
                                               : absl::StrCat(in.state()).c_str()));
  }
  if (in.measurements_size() > kMaxMeasurementsPerTrial) {
    return InvalidArgumentError(absl::StrFormat("trial.measurements: %d; at most %d",
                                                in.measurements_size(), kMaxMeasurementsPerTrial));
  }
  for (int i = 0; i < in.measurements_size(); ++i) {
    const std::string path = StrCat("trial.measurements[", i, "]");
    if (absl::Status st = ValidateMeasurement(in.measurements(i), path); !st.ok()) return st;
    if (absl::Status st = RequireSomeMetric(problem, in.measurements(i), path); !st.ok()) return st;
  }
  *out.mutable_measurements() = in.measurements();
  if (!in.infeasible_reason().empty() && out.state() != v1::Trial::INFEASIBLE) {
    return InvalidArgumentError("trial.infeasible_reason: only an INFEASIBLE trial has one");
  }
  if (in.infeasible_reason().size() > 4096) {
    return InvalidArgumentError("trial.infeasible_reason: longer than 4096 bytes");
  }
  out.set_infeasible_reason(in.infeasible_reason());
  switch (out.state()) {
    case v1::Trial::REQUESTED:
      if (has_final) {
        return InvalidArgumentError(
            "trial.final_measurement: a REQUESTED trial has not run; it has none");
      }
      return out;
    case v1::Trial::ACTIVE:
      if (has_final) {
        return InvalidArgumentError(
            "trial.final_measurement: an ACTIVE trial is still running; it has none");
      }
      if (in.client_id().empty()) {
        return InvalidArgumentError("trial.client_id: an ACTIVE trial needs the client running it");
      }
      return out;
    case v1::Trial::STOPPED:
      if (!has_final && in.measurements_size() > 0) {
        fm = in.measurements(in.measurements_size() - 1);
      }
      break;
    case v1::Trial::INFEASIBLE:
      if (!has_final) return out;
      break;
    default:
      break;
  }
  if (fm.metrics_size() == 0) {
    return InvalidArgumentError(absl::StrCat("trial.final_measurement: a ",
                                             TrialStateName(out.state()),
                                             " trial needs one (or, STOPPED, a measurement)"));
  }
  if (absl::Status st = ValidateMeasurement(fm, "trial.final_measurement"); !st.ok()) return st;
  if (out.state() != v1::Trial::INFEASIBLE) {
    if (absl::Status st = RequireMetrics(problem, fm, "trial.final_measurement"); !st.ok()) {
      return st;
    }
  }
  *out.mutable_final_measurement() = std::move(fm);
  return out;
}

absl::Status RequireElapsedForward(const v1::Trial& trial, const v1::Measurement& m,
                                   absl::string_view path) {
  if (m.elapsed_seconds() == 0) return absl::OkStatus();
  for (const v1::Measurement& earlier : trial.measurements()) {
    if (earlier.elapsed_seconds() > m.elapsed_seconds()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s.elapsed_seconds: %g goes backwards: the trial's measurement at step %d has %g "
          "(elapsed_seconds counts from the trial's start and never decreases)",
          path, m.elapsed_seconds(), earlier.step(), earlier.elapsed_seconds()));
    }
  }
  return absl::OkStatus();
}

absl::Status DisplayNameTaken(const v1::Study& existing, const v1::StudySpec& wanted) {
  return absl::AlreadyExistsError(absl::StrFormat(
      "study.display_name: \"%s\" is study \"%s\", whose spec differs (%s); use that spec, or "
      "another display_name",
      existing.display_name(), existing.name(), FirstDifference(existing.spec(), wanted)));
}

}  // namespace evoscale::service::internal
