// HandleHttp: the routes of evoscaled's HTTP side (the server itself is http_server.cc).
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "service/http_server.h"
#include "service/study/trial_query.h"
#include "service/study_analysis.h"

namespace evoscale::service {
namespace internal {
// Defined in web_assets.cc, generated from web/ by web/embed.cmake: a file's bytes, or empty.
std::string_view WebAsset(std::string_view file);
}  // namespace internal

int HttpStatusFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:  // UNKNOWN, INTERNAL, DATA_LOSS
      return 500;
  }
}

namespace {

HttpResponse Error(const absl::Status& st) {
  return {HttpStatusFor(st.code()), "application/json",
          nlohmann::ordered_json{{"error",
                                  {{"code", absl::StatusCodeToString(st.code())},
                                   {"message", std::string(st.message())}}}}
              .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

google::protobuf::util::JsonPrintOptions PrintOptions() {
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  return opts;
}

template <typename M>
HttpResponse Json(const absl::StatusOr<M>& m) {
  if (!m.ok()) return Error(m.status());
  HttpResponse r;
  auto st = google::protobuf::util::MessageToJsonString(*m, &r.body, PrintOptions());
  if (!st.ok()) return Error(absl::InternalError(std::string(st.message())));
  return r;
}

// Undoes a query's percent-encoding ("%7C" is '|', '+' a space); a '%' not followed by two hex
// digits stays as it is.
std::string PercentDecode(absl::string_view s) {
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out.push_back(' ');
    } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Splits "a=1&b=2" into decoded pairs.
std::vector<std::pair<std::string, std::string>> Query(absl::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view kv : absl::StrSplit(q, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    out.emplace_back(PercentDecode(p.first), PercentDecode(p.second));
  }
  return out;
}

// The dashboard's files, by path; nullopt for any other path. uPlot comes from npm
// (web/package-lock.json) and is compiled in like the rest.
std::optional<HttpResponse> WebFile(absl::string_view path) {
  struct File {
    std::string_view path, file, type;
  };
  static constexpr File kFiles[] = {
      {"/", "index.html", "text/html; charset=utf-8"},
      {"/index.html", "index.html", "text/html; charset=utf-8"},
      {"/app.js", "app.js", "text/javascript; charset=utf-8"},
      {"/charts.js", "charts.js", "text/javascript; charset=utf-8"},
      {"/style.css", "style.css", "text/css; charset=utf-8"},
      {"/uPlot.min.js", "node_modules/uplot/dist/uPlot.iife.min.js", "text/javascript; charset=utf-8"},
      {"/uPlot.min.css", "node_modules/uplot/dist/uPlot.min.css", "text/css; charset=utf-8"},
  };
  for (const File& f : kFiles) {
    if (std::string_view(path.data(), path.size()) != f.path) continue;
    // no-cache: the browser revalidates, so a new evoscaled build shows its own dashboard.
    return HttpResponse{200, std::string(f.type), std::string(internal::WebAsset(f.file)),
                        "no-cache"};
  }
  return std::nullopt;
}

// The query's max_points (2..100000), or `fallback` when it has none.
absl::StatusOr<int> MaxPoints(const std::vector<std::pair<std::string, std::string>>& query,
                              int fallback) {
  for (const auto& [k, v] : query) {
    if (k == "max_points") return IntQueryParam(k, v, 2, 100000);
  }
  return fallback;
}

std::string ProtoJson(const google::protobuf::Message& m) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, PrintOptions());
  return out;
}

// The dashboard's trial table: filtered, sorted and paged here (trial_query.h), so the page
// never holds more than one page of trials. {"trials": [...], "next_page_token", "total_size"}.
HttpResponse TrialTable(StudyCore* core, const std::string& study,
                        const std::vector<std::pair<std::string, std::string>>& query) {
  ReadStudyRequest req;
  req.name = study;
  req.fn = [&](const v1::Study& s, absl::Span<const v1::Trial> trials) -> absl::StatusOr<std::string> {
    absl::StatusOr<TrialQuery> q = ParseTrialQuery(s.spec(), query);
    if (!q.ok()) return q.status();
    TrialPage page = QueryTrials(s.spec(), trials, *q);
    std::string body = "{\"trials\":[";
    for (size_t i = 0; i < page.trials.size(); ++i) {
      if (i > 0) body += ",";
      body += ProtoJson(*page.trials[i]);
    }
    absl::StrAppend(&body, "],\"next_page_token\":", nlohmann::json(page.next_page_token).dump(),
                    ",\"total_size\":", page.total_matching, "}");
    return body;
  };
  absl::StatusOr<std::string> body = core->Call(req);
  if (!body.ok()) return Error(body.status());
  return HttpResponse{200, "application/json", *std::move(body)};
}

HttpResponse Analysis(StudyCore* core, ServiceMetrics* metrics, const std::string& study,
                      const std::vector<std::pair<std::string, std::string>>& query) {
  CapacityLimit limit;
  if (std::optional<v1::ResourceRequest> c = metrics->SchedulerCapacity()) {
    limit.cpu_cores = c->cpu_cores();
    limit.memory_bytes = static_cast<double>(c->memory_bytes());
  }
  ReadStudyRequest req;
  req.name = study;
  req.fn = [&](const v1::Study& s, absl::Span<const v1::Trial> trials) -> absl::StatusOr<std::string> {
    absl::StatusOr<AnalysisOptions> options = ParseAnalysisQuery(s.spec(), query);
    if (!options.ok()) return options.status();
    // Every open page asks every 2 s: an unchanged study's document is the last one, found by
    // a fingerprint that costs a small part of building it (and of holding the study's lock).
    const absl::Time now = absl::Now();
    const std::string key =
        absl::StrCat(study, "|", options->metric, "|", options->max_points, "|",
                     options->max_curves, "|", options->max_curve_points, "|", limit.cpu_cores,
                     "|", limit.memory_bytes);
    const uint64_t fingerprint = AnalysisFingerprint(s, trials, now);
    static absl::Mutex mu(absl::kConstInit);
    static auto* cache = new std::map<std::string, std::pair<uint64_t, std::string>>();
    {
      absl::MutexLock lock(&mu);
      auto it = cache->find(key);
      if (it != cache->end() && it->second.first == fingerprint) return it->second.second;
    }
    std::string body = StudyAnalysisJson(s, trials, *options, limit, now);
    absl::MutexLock lock(&mu);
    if (cache->size() >= 256) cache->clear();  // bounded: a few pages' worth
    (*cache)[key] = {fingerprint, body};
    return body;
  };
  absl::StatusOr<std::string> body = core->Call(req);
  if (!body.ok()) return Error(body.status());
  return HttpResponse{200, "application/json", *std::move(body)};
}

// A managed trial's usage over time: its samples in the telemetry of the study's TRAINING
// workload (service/server.cc), downsampled.
HttpResponse TrialUsage(AutoscalerCore* autoscaler, const std::string& study,
                        const std::string& trial,
                        const std::vector<std::pair<std::string, std::string>>& query) {
  absl::StatusOr<int> max_points = MaxPoints(query, 500);
  if (!max_points.ok()) return Error(max_points.status());
  absl::StatusOr<std::vector<UsagePoint>> points =
      autoscaler->InstanceHistory(study, trial, *max_points);
  if (!points.ok()) {
    if (absl::IsNotFound(points.status())) {
      return Error(absl::NotFoundError(absl::StrCat(
          "no usage recorded for ", trial,
          ": only trials that evoscaled runs (a study with a trial_template) report usage")));
    }
    return Error(points.status());
  }
  nlohmann::json times = nlohmann::json::array(), cpu = nlohmann::json::array(),
                 memory = nlohmann::json::array();
  for (const UsagePoint& p : *points) {
    times.push_back(p.time);
    cpu.push_back(p.cpu_cores);
    memory.push_back(p.memory_bytes);
  }
  return HttpResponse{200, "application/json",
                      nlohmann::ordered_json{{"trial", trial},
                                             {"times", times},
                                             {"cpu_cores", cpu},
                                             {"memory_bytes", memory}}
                          .dump()};
}

// A workload's usage per pod over time with the recommendation as it stood, and replicas
// running against recommended: AutoscalerCore::History, one array per field.
HttpResponse WorkloadHistoryJson(AutoscalerCore* autoscaler, const std::string& workload,
                                 const std::vector<std::pair<std::string, std::string>>& query) {
  absl::StatusOr<int> max_points = MaxPoints(query, 720);
  if (!max_points.ok()) return Error(max_points.status());
  absl::StatusOr<WorkloadHistory> h = autoscaler->History(workload, *max_points);
  if (!h.ok()) return Error(h.status());
  using nlohmann::json;
  json times = json::array(), instances = json::array(), cpu_mean = json::array(),
       cpu_max = json::array(), mem_max = json::array(), qps = json::array(),
       cpu_t = json::array(), cpu_lo = json::array(), cpu_hi = json::array(),
       mem_t = json::array(), mem_lo = json::array(), mem_hi = json::array(),
       cpu_lim = json::array(), mem_lim = json::array(), replicas = json::array();
  for (const WorkloadHistoryBucket& b : h->buckets) {
    auto rec = [&](double v) { return b.has_recommendation ? json(v) : json(nullptr); };
    times.push_back(b.start);
    instances.push_back(b.instances);
    cpu_mean.push_back(b.cpu_cores_mean);
    cpu_max.push_back(b.cpu_cores_max);
    mem_max.push_back(b.memory_bytes_max);
    qps.push_back(b.qps);
    cpu_t.push_back(rec(b.cpu_target));
    cpu_lo.push_back(rec(b.cpu_lower));
    cpu_hi.push_back(rec(b.cpu_upper));
    mem_t.push_back(rec(b.memory_target));
    mem_lo.push_back(rec(b.memory_lower));
    mem_hi.push_back(rec(b.memory_upper));
    cpu_lim.push_back(rec(b.cpu_limit));
    mem_lim.push_back(rec(b.memory_limit));
    replicas.push_back(b.has_recommendation ? json(b.replicas) : json(nullptr));
  }
  return HttpResponse{
      200, "application/json",
      nlohmann::ordered_json{{"workload", workload},
                             {"bucket_seconds", h->bucket_seconds},
                             {"times", times},
                             {"instances", instances},
                             {"cpu_cores_mean", cpu_mean},
                             {"cpu_cores_max", cpu_max},
                             {"memory_bytes_max", mem_max},
                             {"qps", qps},
                             {"cpu_target", cpu_t},
                             {"cpu_lower", cpu_lo},
                             {"cpu_upper", cpu_hi},
                             {"memory_target", mem_t},
                             {"memory_lower", mem_lo},
                             {"memory_upper", mem_hi},
                             {"cpu_limit", cpu_lim},
                             {"memory_limit", mem_lim},
                             {"replicas_recommended", replicas}}
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

}  // namespace

HttpResponse HandleHttp(StudyCore* core, AutoscalerCore* autoscaler, ServiceMetrics* metrics,
                        const TokenAuth* auth, const std::string& method, const std::string& target,
                        const std::string& authorization) {
  absl::string_view path = target;
  absl::string_view query;
  if (size_t q = path.find('?'); q != absl::string_view::npos) {
    query = path.substr(q + 1);
    path = path.substr(0, q);
  }
  if (path == "/healthz") return {200, "text/plain", "ok\n"};
  if (method != "GET" && method != "HEAD") {
    HttpResponse r = Error(absl::InvalidArgumentError(
        absl::StrCat("method ", method, ": only GET and HEAD are served")));
    r.status = 405;
    r.allow = "GET, HEAD";
    return r;
  }
  if (std::optional<HttpResponse> file = WebFile(path)) return *std::move(file);
  if (absl::Status st = auth->Check(authorization, Role::kReader); !st.ok()) return Error(st);
  if (path == "/metrics") {
    return {200, "text/plain; version=0.0.4", metrics->Scrape(core, autoscaler)};
  }
  absl::string_view rest = path;
  if (absl::ConsumePrefix(&rest, "/api/v1/workloads")) {
    if (rest.empty() || rest == "/")
      return Json(absl::StatusOr<v1::ListWorkloadsResponse>(autoscaler->ListWorkloads()));
    absl::ConsumePrefix(&rest, "/");
    if (absl::ConsumeSuffix(&rest, "/history")) {
      return WorkloadHistoryJson(autoscaler, std::string(rest), Query(query));
    }
    if (absl::ConsumeSuffix(&rest, "/recommendation")) {
      v1::GetRecommendationRequest req;
      req.set_workload(std::string(rest));
      return Json(autoscaler->GetRecommendation(req));
    }
    v1::GetWorkloadRequest req;
    req.set_name(std::string(rest));
    return Json(autoscaler->GetWorkload(req));
  }
  if (!absl::ConsumePrefix(&rest, "/api/v1/studies")) {
    return Error(absl::NotFoundError(absl::StrCat("no route for \"", path, "\"")));
  }
  if (rest.empty() || rest == "/") {
    v1::ListStudiesRequest req;
    for (const auto& [k, v] : Query(query)) {
      int n = 0;
      if (k == "page_size") {
        if (!absl::SimpleAtoi(v, &n))
          return Error(absl::InvalidArgumentError("page_size: not an integer"));
        req.set_page_size(n);
      } else if (k == "page_token") {
        req.set_page_token(v);
      } else if (k == "display_name") {
        req.set_display_name(v);
      }
    }
    return Json(core->Call(req));
  }
  absl::ConsumePrefix(&rest, "/");
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  const std::string study = absl::StrCat("studies/", parts[0]);
  if (parts.size() == 1) {
    v1::GetStudyRequest req;
    req.set_name(study);
    return Json(core->Call(req));
  }
  if (parts.size() == 2 && parts[1] == "trials") return TrialTable(core, study, Query(query));
  if (parts.size() == 2 && parts[1] == "analysis") {
    return Analysis(core, metrics, study, Query(query));
  }
  if (parts.size() == 3 && parts[1] == "trials") {
    v1::GetTrialRequest req;
    req.set_name(absl::StrCat(study, "/trials/", parts[2]));
    return Json(core->Call(req));
  }
  if (parts.size() == 4 && parts[1] == "trials" && parts[3] == "usage") {
    const std::string trial = absl::StrCat(study, "/trials/", parts[2]);
    v1::GetTrialRequest req;  // an unknown trial is NOT_FOUND as such, not "no usage"
    req.set_name(trial);
    if (absl::StatusOr<v1::Trial> t = core->Call(req); !t.ok()) return Error(t.status());
    return TrialUsage(autoscaler, study, trial, Query(query));
  }
  if (parts.size() == 2 && parts[1] == "importance") {
    v1::GetParameterImportanceRequest req;
    req.set_parent(study);
    for (const auto& [k, v] : Query(query)) {
      if (k == "metric") req.set_metric(v);
    }
    return Json(core->Call(req));
  }
  if (parts.size() == 2 && parts[1] == "optimal") {
    v1::ListOptimalTrialsRequest req;
    req.set_parent(study);
    return Json(core->Call(req));
  }
  return Error(absl::NotFoundError(absl::StrCat("no route for \"", path, "\"")));
}

}  // namespace evoscale::service
