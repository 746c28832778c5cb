#include "load_model/traces.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace evoscale::load_model {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrFormat("cannot open \"%s\"", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ParseDouble(absl::string_view s, double* out) {
  s = absl::StripAsciiWhitespace(s);
  return !s.empty() && absl::SimpleAtod(s, out) && std::isfinite(*out);
}

}  // namespace

absl::StatusOr<VmTrace> ParseBitbrainsVm(std::string_view content, std::string name) {
  VmTrace trace;
  trace.name = std::move(name);
  bool header_seen = false;
  for (absl::string_view line : absl::StrSplit(absl::string_view(content.data(), content.size()), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!header_seen && absl::StartsWithIgnoreCase(line, "Timestamp")) {
      header_seen = true;
      continue;
    }
    const std::vector<absl::string_view> f = absl::StrSplit(line, ';');
    double ts, cores, cap_mhz, use_mhz, mem_cap_kb, mem_kb;
    if (f.size() < 7 || !ParseDouble(f[0], &ts) || !ParseDouble(f[1], &cores) ||
        !ParseDouble(f[2], &cap_mhz) || !ParseDouble(f[3], &use_mhz) ||
        !ParseDouble(f[5], &mem_cap_kb) || !ParseDouble(f[6], &mem_kb) || cores <= 0 ||
        cap_mhz <= 0 || use_mhz < 0 || mem_kb < 0 || mem_cap_kb < 0) {
      ++trace.skipped_lines;
      continue;
    }
    VmSample s;
    // The column says [ms] but the values are Unix seconds (1372629804 is July 2013).
    s.time = ts > 1e11 ? absl::FromUnixMillis(static_cast<int64_t>(ts))
                       : absl::FromUnixSeconds(static_cast<int64_t>(ts));
    if (!trace.samples.empty() && s.time <= trace.samples.back().time) {
      ++trace.skipped_lines;
      continue;
    }
    s.cpu_capacity_cores = cores;
    s.cpu_cores = use_mhz / (cap_mhz / cores);
    s.memory_bytes = mem_kb * 1024;
    s.memory_capacity_bytes = mem_cap_kb * 1024;
    trace.samples.push_back(s);
  }
  if (trace.samples.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bitbrains trace \"%s\": no valid sample lines (%d skipped)", trace.name,
        trace.skipped_lines));
  }
  return trace;
}

absl::StatusOr<std::vector<VmTrace>> ReadBitbrains(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_regular_file() && entry.path().extension() == ".csv") {
        files.push_back(entry.path());
      }
    }
    std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
      int ia, ib;
      const bool na = absl::SimpleAtoi(a.stem().string(), &ia);
      const bool nb = absl::SimpleAtoi(b.stem().string(), &ib);
      if (na && nb) return ia < ib;
      if (na != nb) return na;
      return a < b;
    });
    if (files.empty()) {
      return absl::NotFoundError(absl::StrFormat("no .csv files in \"%s\"", path));
    }
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  } else {
    return absl::NotFoundError(absl::StrFormat("bitbrains path \"%s\" does not exist", path));
  }
  std::vector<VmTrace> traces;
  for (const auto& file : files) {
    absl::StatusOr<std::string> content = ReadFile(file.string());
    if (!content.ok()) return content.status();
    absl::StatusOr<VmTrace> vm = ParseBitbrainsVm(*content, file.stem().string());
    if (!vm.ok()) return vm.status();
    traces.push_back(*std::move(vm));
  }
  return traces;
}

absl::StatusOr<PodValues> ParseAlibabaPodCsv(std::string_view content, std::string_view file) {
  PodValues out;
  int ts_col = -1, value_col = -1, ip_col = -1;
  size_t columns = 0;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(absl::string_view(content.data(), content.size()), '\n')) {
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    const std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (header) {
      header = false;
      columns = f.size();
      for (size_t i = 0; i < f.size(); ++i) {
        const absl::string_view h = absl::StripAsciiWhitespace(f[i]);
        if (h == "timestamp_anon") ts_col = static_cast<int>(i);
        if (h == "value") value_col = static_cast<int>(i);
        if (h == "container_ip") ip_col = static_cast<int>(i);
      }
      if (ts_col < 0 || value_col < 0 || ip_col < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: header must name timestamp_anon, value and container_ip; got \"%s\"",
            std::string(file), std::string(line)));
      }
      continue;
    }
    PodValue v;
    if (f.size() != columns || !ParseDouble(f[ts_col], &v.timestamp) ||
        !ParseDouble(f[value_col], &v.value)) {
      ++out.skipped_lines;
      continue;
    }
    v.container_ip = std::string(absl::StripAsciiWhitespace(f[ip_col]));
    out.rows.push_back(std::move(v));
  }
  if (header) return absl::InvalidArgumentError(absl::StrFormat("%s: empty file", std::string(file)));
  return out;
}

namespace {

// One pod at one step of the GenAI trace, joined from its per-signal files.
struct GenAiPod {
  double duty = -1;  // -1: the pod reported no duty cycle at this step.
  double gpu_memory = 0;
  double qps = 0;
};
// Timestamp -> container_ip -> that pod's values at that step.
using GenAiSteps = std::map<double, std::unordered_map<std::string, GenAiPod>>;

// The per-pod file `name` of the trace in `dir`; an optional one that is missing reads as no rows.
absl::StatusOr<PodValues> LoadGenAiFile(const std::string& dir, const char* name, bool required) {
  namespace fs = std::filesystem;
  const std::string path = (fs::path(dir) / name).string();
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (required) {
      return absl::NotFoundError(absl::StrFormat("alibaba-genai: \"%s\" not found", path));
    }
    return PodValues{};
  }
  absl::StatusOr<std::string> content = ReadFile(path);
  if (!content.ok()) return content.status();
  return ParseAlibabaPodCsv(*content, name);
}

// The steps are the duty-cycle rows' timestamps: each valid row is one pod at one step. Rows
// with a negative value or no pod count as skipped.
GenAiSteps StepsFromDutyCycle(const PodValues& duty, int64_t* skipped_lines) {
  GenAiSteps steps;
  for (const PodValue& v : duty.rows) {
    if (v.value < 0 || v.container_ip.empty()) {
      ++*skipped_lines;
      continue;
    }
    steps[v.timestamp][v.container_ip].duty = v.value;
  }
  return steps;
}

// The other signals attach to the step at or after their timestamp (never to an earlier one);
// rows after the last step are dropped. QPS rows add to their pod's QPS at that step; rows
// without a pod are the workload's and go to `workload_qps` (step -> QPS). Negative rows count
// as skipped.
void AttachQps(const PodValues& qps, GenAiSteps* steps, std::map<double, double>* workload_qps,
               int64_t* skipped_lines) {
  for (const PodValue& v : qps.rows) {
    if (v.value < 0) {
      ++*skipped_lines;
      continue;
    }
    auto it = steps->lower_bound(v.timestamp);
    if (it == steps->end()) continue;
    if (v.container_ip.empty()) {
      (*workload_qps)[it->first] += v.value;
    } else {
      it->second[v.container_ip].qps += v.value;
    }
  }
}

// GPU memory rows set the memory of a pod already at that step (the last row wins); rows of
// other pods, negative ones and those without a pod are ignored.
void AttachGpuMemory(const PodValues& mem, GenAiSteps* steps) {
  for (const PodValue& v : mem.rows) {
    if (v.value < 0 || v.container_ip.empty()) continue;
    auto it = steps->lower_bound(v.timestamp);
    if (it == steps->end()) continue;
    auto p = it->second.find(v.container_ip);
    if (p != it->second.end()) p->second.gpu_memory = v.value;
  }
}

// Queueing-latency rows, whatever their pod: step -> (sum, count). Negative rows are ignored.
std::map<double, std::pair<double, int>> LatencyPerStep(const PodValues& rt,
                                                        const GenAiSteps& steps) {
  std::map<double, std::pair<double, int>> latency;
  for (const PodValue& v : rt.rows) {
    if (v.value < 0) continue;
    auto it = steps.lower_bound(v.timestamp);
    if (it == steps.end()) continue;
    latency[it->first].first += v.value;
    latency[it->first].second += 1;
  }
  return latency;
}

// One step of the trace: the pods that reported a duty cycle make its replicas, demand and GPU
// memory; every pod's QPS and the workload's make its QPS; its latency is the mean reported.
ReplicaStep ToReplicaStep(double ts, const std::unordered_map<std::string, GenAiPod>& pods,
                          const std::map<double, double>& workload_qps,
                          const std::map<double, std::pair<double, int>>& latency) {
  ReplicaStep s;
  s.time = absl::FromUnixSeconds(static_cast<int64_t>(std::llround(ts)));
  for (const auto& [ip, pod] : pods) {
    if (pod.duty >= 0) {
      ++s.observed_replicas;
      s.demand += pod.duty / 100.0;
      s.gpu_memory_bytes += pod.gpu_memory;
    }
    s.qps += pod.qps;
  }
  if (auto w = workload_qps.find(ts); w != workload_qps.end()) s.qps += w->second;
  if (auto l = latency.find(ts); l != latency.end()) {
    s.latency_ms = l->second.first / l->second.second;
  }
  return s;
}

}  // namespace

absl::StatusOr<ReplicaTrace> ReadAlibabaGenAi(const std::string& dir) {
  absl::StatusOr<PodValues> duty = LoadGenAiFile(dir, "pod_gpu_duty_cycle_anon.csv", true);
  if (!duty.ok()) return duty.status();
  absl::StatusOr<PodValues> qps = LoadGenAiFile(dir, "qps.csv", false);
  if (!qps.ok()) return qps.status();
  absl::StatusOr<PodValues> mem = LoadGenAiFile(dir, "pod_gpu_memory_used_bytes_anon.csv", false);
  if (!mem.ok()) return mem.status();
  absl::StatusOr<PodValues> rt = LoadGenAiFile(dir, "queue_rt_raw_anon.csv", false);
  if (!rt.ok()) return rt.status();

  ReplicaTrace trace;
  trace.name = "alibaba-genai";
  trace.skipped_lines = duty->skipped_lines + qps->skipped_lines + mem->skipped_lines +
                        rt->skipped_lines;
  GenAiSteps steps = StepsFromDutyCycle(*duty, &trace.skipped_lines);
  if (steps.empty()) {
    return absl::InvalidArgumentError("alibaba-genai: no valid GPU duty-cycle rows");
  }
  std::map<double, double> workload_qps;
  AttachQps(*qps, &steps, &workload_qps, &trace.skipped_lines);
  AttachGpuMemory(*mem, &steps);
  const std::map<double, std::pair<double, int>> latency = LatencyPerStep(*rt, steps);
  for (const auto& [ts, pods] : steps) {
    trace.steps.push_back(ToReplicaStep(ts, pods, workload_qps, latency));
  }
  return trace;
}

absl::StatusOr<ReplicaTrace> ParseAzureLlm(std::string_view content,
                                           const AzureLlmOptions& options) {
  ReplicaTrace trace;
  trace.name = "azure-llm";
  if (!(options.prefill_tokens_per_s > 0) || !(options.decode_tokens_per_s > 0) ||
      options.step <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "azure-llm: step and token throughputs must be positive");
  }
  std::map<int64_t, std::pair<int64_t, double>> buckets;  // step -> (requests, work s).
  bool header = true;
  const int64_t step_s = std::max<int64_t>(1, absl::ToInt64Seconds(options.step));
  for (absl::string_view line : absl::StrSplit(absl::string_view(content.data(), content.size()), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (header) {
      header = false;
      if (absl::StartsWithIgnoreCase(line, "TIMESTAMP")) continue;
    }
    const std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    absl::Time t;
    std::string err;
    double context, generated;
    if (f.size() != 3 ||
        !absl::ParseTime("%Y-%m-%d %H:%M:%E*S", std::string(f[0]), absl::UTCTimeZone(), &t,
                         &err) ||
        !ParseDouble(f[1], &context) || !ParseDouble(f[2], &generated) || context < 0 ||
        generated < 0) {
      ++trace.skipped_lines;
      continue;
    }
    const int64_t b = absl::ToUnixSeconds(t) / step_s;
    auto& [requests, work] = buckets[b];
    ++requests;
    work += context / options.prefill_tokens_per_s + generated / options.decode_tokens_per_s;
  }
  if (buckets.empty()) return absl::InvalidArgumentError("azure-llm: no valid request rows");
  // Dense steps from the first to the last bucket (empty minutes have no load).
  for (int64_t b = buckets.begin()->first; b <= buckets.rbegin()->first; ++b) {
    ReplicaStep s;
    s.time = absl::FromUnixSeconds((b + 1) * step_s);  // Steps are stamped at their end.
    if (auto it = buckets.find(b); it != buckets.end()) {
      s.qps = static_cast<double>(it->second.first) / step_s;
      s.demand = it->second.second / step_s;
    }
    trace.steps.push_back(s);
  }
  return trace;
}

absl::StatusOr<ReplicaTrace> ReadAzureLlm(const std::string& path,
                                          const AzureLlmOptions& options) {
  std::error_code ec;
  std::string file = path;
  if (std::filesystem::is_directory(path, ec)) {
    file = (std::filesystem::path(path) / "AzureLLMInferenceTrace_conv.csv").string();
  }
  absl::StatusOr<std::string> content = ReadFile(file);
  if (!content.ok()) return content.status();
  return ParseAzureLlm(*content, options);
}

}  // namespace evoscale::load_model
