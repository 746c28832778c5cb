#include "service/http_api.h"

#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "service/study/study_converter.h"
#include "service/study/trial_query.h"

namespace evoscale::service {
namespace internal {
// Defined in web_assets.cc, generated from web/ by web/embed.cmake: a file's bytes, or empty.
std::string_view WebAsset(std::string_view file);
}  // namespace internal

int HttpStatusFor(absl::StatusCode code) {
  using C = absl::StatusCode;
  static constexpr std::pair<C, int> kStatus[] = {
      {C::kOk, 200},          {C::kCancelled, 499},          {C::kInvalidArgument, 400},
      {C::kOutOfRange, 400},  {C::kFailedPrecondition, 400}, {C::kUnauthenticated, 401},
      {C::kNotFound, 404},    {C::kPermissionDenied, 403},   {C::kAlreadyExists, 409},
      {C::kAborted, 409},     {C::kResourceExhausted, 429},  {C::kUnimplemented, 501},
      {C::kUnavailable, 503}, {C::kDeadlineExceeded, 504},
  };
  for (const auto& [c, status] : kStatus) {
    if (c == code) return status;
  }
  return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
}

namespace {

std::string Dump(const nlohmann::ordered_json& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

HttpResponse Error(const absl::Status& st) {
  return {HttpStatusFor(st.code()), "application/json",
          Dump({{"error",
                 {{"code", absl::StatusCodeToString(st.code())},
                  {"message", std::string(st.message())}}}})};
}

// A message as protobuf's JSON: field names as in the .proto, defaults included.
absl::StatusOr<std::string> ProtoJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  auto st = google::protobuf::util::MessageToJsonString(m, &out, options);
  if (!st.ok()) return absl::InternalError(std::string(st.message()));
  return out;
}

absl::StatusOr<HttpResponse> JsonBody(absl::StatusOr<std::string> body) {
  if (!body.ok()) return body.status();
  return HttpResponse{200, "application/json", *std::move(body)};
}

// A call's answer as protobuf's JSON.
template <typename M>
absl::StatusOr<HttpResponse> Json(const absl::StatusOr<M>& m) {
  if (!m.ok()) return m.status();
  return JsonBody(ProtoJson(*m));
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
std::vector<std::pair<std::string, std::string>> ParseQuery(absl::string_view q) {
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

// One field of every row, as a JSON array; null in the rows where `present` is false.
template <typename Row, typename T>
nlohmann::json Column(absl::Span<const Row> rows, T Row::*field, bool Row::*present = nullptr) {
  nlohmann::json column = nlohmann::json::array();
  for (const Row& row : rows) {
    column.push_back(present == nullptr || row.*present ? nlohmann::json(row.*field) : nullptr);
  }
  return column;
}

// A workload's usage per pod over time with the recommendation as it stood (null where there
// was none), and replicas running against recommended: one array per field of its buckets;
// `instances_now`, the instances reporting now with what they serve.
std::string WorkloadHistoryJson(const std::string& workload, const WorkloadHistory& h) {
  using B = WorkloadHistoryBucket;
  const absl::Span<const B> b = h.buckets;
  bool B::*const rec = &B::has_recommendation;
  nlohmann::json latency = nlohmann::json::array();
  for (const B& row : b) {
    latency.push_back(row.latency_seconds >= 0 ? nlohmann::json(row.latency_seconds) : nullptr);
  }
  nlohmann::json now = nlohmann::json::array();
  for (const InstanceNow& in : h.instances) {
    nlohmann::json versions = nlohmann::json::object();
    for (const auto& [name, version] : in.versions) versions[name] = version;
    now.push_back({{"instance", in.instance},
                   {"time", in.time},
                   {"versions", versions},
                   {"versions_time", in.versions.empty() ? nlohmann::json(nullptr)
                                                         : nlohmann::json(in.versions_time)}});
  }
  return Dump({{"workload", workload},
               {"bucket_seconds", h.bucket_seconds},
               {"times", Column(b, &B::start)},
               {"instances", Column(b, &B::instances)},
               {"cpu_cores_mean", Column(b, &B::cpu_cores_mean)},
               {"cpu_cores_max", Column(b, &B::cpu_cores_max)},
               {"memory_bytes_max", Column(b, &B::memory_bytes_max)},
               {"qps", Column(b, &B::qps)},
               {"latency_seconds", latency},
               {"cpu_target", Column(b, &B::cpu_target, rec)},
               {"cpu_lower", Column(b, &B::cpu_lower, rec)},
               {"cpu_upper", Column(b, &B::cpu_upper, rec)},
               {"memory_target", Column(b, &B::memory_target, rec)},
               {"memory_lower", Column(b, &B::memory_lower, rec)},
               {"memory_upper", Column(b, &B::memory_upper, rec)},
               {"cpu_limit", Column(b, &B::cpu_limit, rec)},
               {"memory_limit", Column(b, &B::memory_limit, rec)},
               {"replicas_recommended", Column(b, &B::replicas, rec)},
               {"instances_now", now}});
}

}  // namespace

HttpResponse HttpApi::Handle(const std::string& method, const std::string& target,
                             const std::string& authorization, const std::string& body) {
  const std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(target, absl::MaxSplits('?', 1));
  const absl::string_view path = parts.first, query = parts.second;
  if (path == "/healthz") return {200, "text/plain", "ok\n"};
  if (absl::string_view verb = path; absl::ConsumePrefix(&verb, "/scheduler/")) {
    return HandleExtender(method, verb, authorization, body);
  }
  if (method != "GET" && method != "HEAD") {
    HttpResponse r = Error(absl::InvalidArgumentError(
        absl::StrCat("method ", method, ": only GET and HEAD are served")));
    r.status = 405;
    r.allow = "GET, HEAD";
    return r;
  }
  if (std::optional<HttpResponse> file = WebFile(path)) return *std::move(file);
  const absl::Status allowed = auth_->Check(authorization, Role::kReader);
  const absl::StatusOr<Route> route = allowed.ok() ? ParseRoute(path) : allowed;
  absl::StatusOr<HttpResponse> r = route.ok() ? (this->*route->process)(*route, ParseQuery(query))
                                              : absl::StatusOr<HttpResponse>(route.status());
  if (!r.ok()) return Error(r.status());  // every error of every route is rendered here
  return *std::move(r);
}

HttpResponse HttpApi::HandleExtender(const std::string& method, absl::string_view verb,
                                     const std::string& authorization, const std::string& body) {
  if (method != "POST") {
    HttpResponse r = Error(absl::InvalidArgumentError(
        absl::StrCat("method ", method, ": kube-scheduler's extender verbs are POST")));
    r.status = 405;
    r.allow = "POST";
    return r;
  }
  if (absl::Status allowed = auth_->Check(authorization, Role::kWriter); !allowed.ok()) {
    return Error(allowed);
  }
  extender::ExtenderReply reply = extender_.Handle(verb, body);
  return {reply.status, "application/json", std::move(reply.body)};
}

absl::StatusOr<HttpApi::Route> HttpApi::ParseRoute(absl::string_view path) {
  if (path == "/metrics") return Route{&HttpApi::ProcessMetrics};
  absl::string_view rest = path;
  if (absl::ConsumePrefix(&rest, "/api/v1/workloads")) {
    if (rest.empty() || rest == "/") return Route{&HttpApi::ProcessListWorkloads};
    absl::ConsumePrefix(&rest, "/");
    if (absl::ConsumeSuffix(&rest, "/history")) {
      return Route{&HttpApi::ProcessWorkloadHistory, std::string(rest)};
    }
    if (absl::ConsumeSuffix(&rest, "/recommendation")) {
      return Route{&HttpApi::ProcessRecommendation, std::string(rest)};
    }
    return Route{&HttpApi::ProcessWorkload, std::string(rest)};
  }
  auto no_route = [path] {
    return absl::NotFoundError(absl::StrCat("no route for \"", path, "\""));
  };
  if (!absl::ConsumePrefix(&rest, "/api/v1/studies")) return no_route();
  if (rest.empty() || rest == "/") return Route{&HttpApi::ProcessListStudies};
  absl::ConsumePrefix(&rest, "/");
  const std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  Route route{nullptr, absl::StrCat("studies/", parts[0])};
  if (parts.size() == 1) {
    route.process = &HttpApi::ProcessStudy;
  } else if (parts.size() == 2) {
    if (parts[1] == "trials") route.process = &HttpApi::ProcessTrials;
    if (parts[1] == "analysis") route.process = &HttpApi::ProcessAnalysis;
    if (parts[1] == "importance") route.process = &HttpApi::ProcessImportance;
    if (parts[1] == "optimal") route.process = &HttpApi::ProcessOptimal;
  } else if (parts[1] == "trials" &&
             (parts.size() == 3 || (parts.size() == 4 && parts[3] == "usage"))) {
    route.trial = absl::StrCat(route.name, "/trials/", parts[2]);
    route.process = parts.size() == 3 ? &HttpApi::ProcessTrial : &HttpApi::ProcessTrialUsage;
  }
  if (route.process == nullptr) return no_route();
  return route;
}

absl::StatusOr<HttpResponse> HttpApi::ProcessMetrics(const Route&, const Query&) {
  return HttpResponse{200, "text/plain; version=0.0.4", metrics_->Scrape(core_, autoscaler_)};
}

absl::StatusOr<HttpResponse> HttpApi::ProcessListWorkloads(const Route&, const Query&) {
  return Json(absl::StatusOr<v1::ListWorkloadsResponse>(autoscaler_->ListWorkloads()));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessWorkload(const Route& route, const Query&) {
  v1::GetWorkloadRequest req;
  req.set_name(route.name);
  return Json(autoscaler_->GetWorkload(req));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessWorkloadHistory(const Route& route,
                                                             const Query& query) {
  absl::StatusOr<int> max_points = MaxPoints(query, 720);
  if (!max_points.ok()) return max_points.status();
  absl::StatusOr<WorkloadHistory> h = autoscaler_->History(route.name, *max_points);
  if (!h.ok()) return h.status();
  return HttpResponse{200, "application/json", WorkloadHistoryJson(route.name, *h)};
}

absl::StatusOr<HttpResponse> HttpApi::ProcessRecommendation(const Route& route, const Query&) {
  v1::GetRecommendationRequest req;
  req.set_workload(route.name);
  return Json(autoscaler_->GetRecommendation(req));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessListStudies(const Route&, const Query& query) {
  v1::ListStudiesRequest req;
  for (const auto& [k, v] : query) {
    int n = 0;
    if (k == "page_size") {
      if (!absl::SimpleAtoi(v, &n)) return absl::InvalidArgumentError("page_size: not an integer");
      req.set_page_size(n);
    } else if (k == "page_token") {
      req.set_page_token(v);
    } else if (k == "display_name") {
      req.set_display_name(v);
    }
  }
  return Json(core_->Call(req));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessStudy(const Route& route, const Query&) {
  ReadStudyRequest req;
  req.name = route.name;
  req.stored_if_elsewhere = true;  // another replica's study: as the database holds it
  req.fn = [](const v1::Study& s, absl::Span<const v1::Trial>,
              uint64_t) -> absl::StatusOr<std::string> { return ProtoJson(s); };
  return JsonBody(core_->Call(req));
}

// The dashboard's trial table: filtered, sorted and paged here (trial_query.h), so the page
// never holds more than one page of trials. {"trials": [...], "next_page_token", "total_size"}.
absl::StatusOr<HttpResponse> HttpApi::ProcessTrials(const Route& route, const Query& query) {
  ReadStudyRequest req;
  req.name = route.name;
  req.stored_if_elsewhere = true;
  req.fn = [&](const v1::Study& s, absl::Span<const v1::Trial> trials,
               uint64_t) -> absl::StatusOr<std::string> {
    absl::StatusOr<TrialQuery> q = ParseTrialQuery(s.spec(), query);
    if (!q.ok()) return q.status();
    TrialPage page = QueryTrials(s.spec(), trials, *q);
    // Each trial as protobuf prints it, as GET .../trials/{t} does (nlohmann would have to parse
    // it again, under the study's lock, and prints doubles in other digits); nlohmann the rest.
    std::string rows;
    for (const v1::Trial* t : page.trials) {
      absl::StatusOr<std::string> row = ProtoJson(*t);
      if (!row.ok()) return row.status();
      absl::StrAppend(&rows, rows.empty() ? "" : ",", *row);
    }
    const std::string rest =  // {"next_page_token":...,"total_size":...}
        Dump({{"next_page_token", page.next_page_token}, {"total_size", page.total_matching}});
    return absl::StrCat("{\"trials\":[", rows, "],", absl::string_view(rest).substr(1));
  };
  return JsonBody(core_->Call(req));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessAnalysis(const Route& route, const Query& query) {
  CapacityLimit limit;
  if (std::optional<v1::ResourceRequest> c = metrics_->SchedulerCapacity()) {
    limit.cpu_cores = c->cpu_cores();
    limit.memory_bytes = static_cast<double>(c->memory_bytes());
  }
  ReadStudyRequest req;
  req.name = route.name;
  req.stored_if_elsewhere = true;
  req.fn = [&](const v1::Study& s, absl::Span<const v1::Trial> trials,
               uint64_t trials_version) -> absl::StatusOr<std::string> {
    absl::StatusOr<AnalysisOptions> options = ParseAnalysisQuery(s.spec(), query);
    if (!options.ok()) return options.status();
    return analyses_.Document(s, trials, trials_version, *options, limit, absl::Now());
  };
  return JsonBody(core_->Call(req));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessTrial(const Route& route, const Query&) {
  v1::GetTrialRequest req;
  req.set_name(route.trial);
  absl::StatusOr<v1::Trial> trial = core_->Call(req);
  if (trial.ok() || !StudyOwnerAddress(trial.status()).has_value()) return Json(std::move(trial));
  // Another replica's study (GetTrial checked the name): the trial as the database holds it.
  ReadStudyRequest read;
  read.name = route.name;
  read.stored_if_elsewhere = true;
  read.fn = [&route](const v1::Study&, absl::Span<const v1::Trial> trials,
                     uint64_t) -> absl::StatusOr<std::string> {
    for (const v1::Trial& t : trials) {
      if (t.name() == route.trial && t.state() != v1::Trial::STATE_UNSPECIFIED) return ProtoJson(t);
    }
    return absl::NotFoundError(absl::StrCat("trial \"", route.trial, "\" not found"));
  };
  return JsonBody(core_->Call(read));
}

// A managed trial's usage over time: its samples in the telemetry of the study's TRAINING
// workload (service/server.cc), downsampled. An unknown trial is NOT_FOUND as such.
absl::StatusOr<HttpResponse> HttpApi::ProcessTrialUsage(const Route& route, const Query& query) {
  v1::GetTrialRequest get;
  get.set_name(route.trial);
  if (absl::StatusOr<v1::Trial> t = core_->Call(get); !t.ok()) return t.status();
  absl::StatusOr<int> max_points = MaxPoints(query, 500);
  if (!max_points.ok()) return max_points.status();
  absl::StatusOr<std::vector<UsagePoint>> points =
      autoscaler_->InstanceHistory(route.name, route.trial, *max_points);
  if (absl::IsNotFound(points.status())) {
    return absl::NotFoundError(absl::StrCat(
        "no usage recorded for ", route.trial,
        ": only trials that evoscaled runs (a study with a trial_template) report usage"));
  }
  if (!points.ok()) return points.status();
  const absl::Span<const UsagePoint> p = *points;
  return JsonBody(Dump({{"trial", route.trial},
                        {"times", Column(p, &UsagePoint::time)},
                        {"cpu_cores", Column(p, &UsagePoint::cpu_cores)},
                        {"memory_bytes", Column(p, &UsagePoint::memory_bytes)}}));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessImportance(const Route& route, const Query& query) {
  v1::GetParameterImportanceRequest req;
  req.set_parent(route.name);
  for (const auto& [k, v] : query) {
    if (k == "metric") req.set_metric(v);
  }
  absl::StatusOr<v1::GetParameterImportanceResponse> resp = core_->Call(req);
  if (resp.ok() || !StudyOwnerAddress(resp.status()).has_value()) return Json(resp);
  // Another replica's study: computed here from the study as the database holds it.
  ReadStudyRequest read;
  read.name = route.name;
  read.stored_if_elsewhere = true;
  read.fn = [&req](const v1::Study& s, absl::Span<const v1::Trial> trials,
                   uint64_t) -> absl::StatusOr<std::string> {
    absl::StatusOr<search::ProblemStatement> problem = ToProblem(s.spec());
    if (!problem.ok()) return problem.status();
    absl::StatusOr<v1::GetParameterImportanceResponse> r =
        ParameterImportanceOf(*problem, trials, req.metric());
    if (!r.ok()) return r.status();
    return ProtoJson(*r);
  };
  return JsonBody(core_->Call(read));
}

absl::StatusOr<HttpResponse> HttpApi::ProcessOptimal(const Route& route, const Query&) {
  v1::ListOptimalTrialsRequest req;
  req.set_parent(route.name);
  absl::StatusOr<v1::ListOptimalTrialsResponse> resp = core_->Call(req);
  if (resp.ok() || !StudyOwnerAddress(resp.status()).has_value()) return Json(resp);
  // Another replica's study: computed here from the study as the database holds it.
  ReadStudyRequest read;
  read.name = route.name;
  read.stored_if_elsewhere = true;
  read.fn = [](const v1::Study& s, absl::Span<const v1::Trial> trials,
               uint64_t) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<search::MetricConfig>> metrics = MetricConfigs(s.spec());
    if (!metrics.ok()) return metrics.status();
    const std::vector<int64_t> ids = OptimalTrialIds(*metrics, trials);
    std::map<int64_t, const v1::Trial*> by_id;
    for (const v1::Trial& t : trials) by_id[t.id()] = &t;
    v1::ListOptimalTrialsResponse r;
    for (int64_t id : ids) {
      if (auto it = by_id.find(id); it != by_id.end()) *r.add_optimal_trials() = *it->second;
    }
    return ProtoJson(r);
  };
  return JsonBody(core_->Call(read));
}

}  // namespace evoscale::service
