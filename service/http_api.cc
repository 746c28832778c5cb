// HandleHttp: the routes of evoscaled's HTTP side (the server itself is http_server.cc).
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "service/http_server.h"

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

template <typename M>
HttpResponse Json(const absl::StatusOr<M>& m) {
  if (!m.ok()) return Error(m.status());
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  HttpResponse r;
  auto st = google::protobuf::util::MessageToJsonString(*m, &r.body, opts);
  if (!st.ok()) return Error(absl::InternalError(std::string(st.message())));
  return r;
}

// Splits "a=1&b=2" into pairs.
std::vector<std::pair<std::string, std::string>> Query(absl::string_view q) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view kv : absl::StrSplit(q, '&', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    out.emplace_back(p.first, p.second);
  }
  return out;
}

// The dashboard's files, by path; nullopt for any other path.
std::optional<HttpResponse> WebFile(absl::string_view path) {
  std::string_view file, type;
  if (path == "/" || path == "/index.html") {
    file = "index.html";
    type = "text/html; charset=utf-8";
  } else if (path == "/app.js") {
    file = "app.js";
    type = "text/javascript; charset=utf-8";
  } else if (path == "/style.css") {
    file = "style.css";
    type = "text/css; charset=utf-8";
  } else {
    return std::nullopt;
  }
  // no-cache: the browser revalidates, so a new evoscaled build shows its own dashboard.
  return HttpResponse{200, std::string(type), std::string(internal::WebAsset(file)), "no-cache"};
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
  if (parts.size() == 2 && parts[1] == "trials") {
    v1::ListTrialsRequest req;
    req.set_parent(study);
    for (const auto& [k, v] : Query(query)) {
      int n = 0;
      if (k == "page_size") {
        if (!absl::SimpleAtoi(v, &n))
          return Error(absl::InvalidArgumentError("page_size: not an integer"));
        req.set_page_size(n);
      } else if (k == "page_token") {
        req.set_page_token(v);
      } else if (k == "state") {
        // Any case, as the CLI takes it: state=succeeded is SUCCEEDED.
        v1::Trial::State s;
        if (!v1::Trial::State_Parse(absl::AsciiStrToUpper(v), &s) ||
            s == v1::Trial::STATE_UNSPECIFIED) {
          return Error(absl::InvalidArgumentError(absl::StrCat(
              "state: unknown trial state \"", v,
              "\" (want requested, active, stopping, succeeded, infeasible, failed or stopped)")));
        }
        req.set_state(s);
      }
    }
    return Json(core->Call(req));
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
