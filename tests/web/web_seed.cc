// Seeds a real evoscaled over gRPC for the dashboard's browser test, as clients would: a study of
// many trials with learning curves (CreateTrial with their measurements, from 8 connections at
// once), a two-metric study, a study with a budget whose trials cost core-hours, an autoscaled
// workload with two hours of telemetry from several replicas. Prints what it made as one JSON
// line, for the test to check the charts against.
//
//   web_seed --server HOST:PORT [--token T] curves   --trials N --steps S [--name NAME]
//   web_seed --server HOST:PORT [--token T] pareto   --trials N [--name NAME]
//   web_seed --server HOST:PORT [--token T] budget   [--name NAME]
//   web_seed --server HOST:PORT [--token T] workload --name NS/NAME --minutes M --instances K
//            [--policy EVOSCALE|VPA|HPA] [--request-percentile P]
#include <grpcpp/grpcpp.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "evoscale/v1/autoscaler.grpc.pb.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "google/protobuf/util/time_util.h"

namespace v1 = evoscale::v1;

namespace {

struct Args {
  std::string server, token, scenario, name, policy;
  double request_percentile = 0;
  int trials = 0, steps = 20, minutes = 120, instances = 3;
};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "web_seed: %s\n", what.c_str());
  std::exit(1);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Fail(k + ": a value is missing");
      return argv[++i];
    };
    if (k == "--server") a.server = value();
    else if (k == "--token") a.token = value();
    else if (k == "--name") a.name = value();
    else if (k == "--policy") a.policy = value();
    else if (k == "--request-percentile") a.request_percentile = std::stod(value());
    else if (k == "--trials") a.trials = std::atoi(value().c_str());
    else if (k == "--steps") a.steps = std::atoi(value().c_str());
    else if (k == "--minutes") a.minutes = std::atoi(value().c_str());
    else if (k == "--instances") a.instances = std::atoi(value().c_str());
    else if (k.rfind("--", 0) != 0 && a.scenario.empty()) a.scenario = k;
    else Fail("unknown argument " + k);
  }
  if (a.server.empty() || a.scenario.empty()) Fail("usage: web_seed --server HOST:PORT SCENARIO ...");
  return a;
}

// The token and a deadline for one call. The call waits for its connection rather than failing
// at the first failed connect: the seeder opens 8 connections at once on a loaded machine, and
// one refused or reset attempt must not fail a test (CI saw "failed to connect to all
// addresses" from a server that was up and had answered the same seeder a moment before).
void Authorize(grpc::ClientContext& ctx, const Args& a) {
  if (!a.token.empty()) ctx.AddMetadata("authorization", "Bearer " + a.token);
  ctx.set_wait_for_ready(true);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
}

void Check(const grpc::Status& st, const std::string& what) {
  if (!st.ok()) Fail(what + ": " + st.error_message());
}

v1::ParameterSpec Double(const std::string& name, double lo, double hi, bool log = false) {
  v1::ParameterSpec p;
  p.set_name(name);
  p.mutable_double_spec()->set_min(lo);
  p.mutable_double_spec()->set_max(hi);
  if (log) p.set_scale(v1::ParameterSpec::LOG);
  return p;
}

std::string CreateStudy(v1::StudyService::Stub& stub, const Args& a, const v1::StudySpec& spec,
                        const std::string& display_name) {
  grpc::ClientContext ctx;
  Authorize(ctx, a);
  v1::CreateStudyRequest req;
  req.mutable_study()->set_display_name(display_name);
  *req.mutable_study()->mutable_spec() = spec;
  v1::Study study;
  Check(stub.CreateStudy(&ctx, req, &study), "CreateStudy");
  return study.name();
}

// Creates `trials` from 8 connections at once.
void CreateAll(const Args& a, const std::string& study, const std::vector<v1::Trial>& trials) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&, w] {
      grpc::ChannelArguments args;
      args.SetInt("evoscale.seed.worker", w);  // a connection of its own
      auto stub = v1::StudyService::NewStub(
          grpc::CreateCustomChannel(a.server, grpc::InsecureChannelCredentials(), args));
      for (size_t i; (i = next.fetch_add(1)) < trials.size();) {
        grpc::ClientContext ctx;
        Authorize(ctx, a);
        v1::CreateTrialRequest req;
        req.set_parent(study);
        *req.mutable_trial() = trials[i];
        v1::Trial out;
        Check(stub->CreateTrial(&ctx, req, &out), "CreateTrial");
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

// A CTR model's search: log loss against learning rate, depth, optimizer (SGD with a
// conditional momentum) and dropout; each trial's loss falls over its steps. Every 10th trial
// was stopped early (half its steps), every 50th (from the 8th) was infeasible.
void Curves(const Args& a) {
  auto stub = v1::StudyService::NewStub(grpc::CreateChannel(a.server, grpc::InsecureChannelCredentials()));
  v1::StudySpec spec;
  auto* metric = spec.add_metrics();
  metric->set_name("logloss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  *spec.add_parameters() = Double("lr", 1e-4, 1e-1, true);
  v1::ParameterSpec layers;
  layers.set_name("layers");
  layers.mutable_integer_spec()->set_min(1);
  layers.mutable_integer_spec()->set_max(8);
  *spec.add_parameters() = layers;
  v1::ParameterSpec optimizer;
  optimizer.set_name("optimizer");
  for (const char* v : {"adam", "sgd", "adagrad"}) optimizer.mutable_categorical_spec()->add_values(v);
  auto* child = optimizer.add_children();
  child->add_parent_categorical_values("sgd");
  *child->mutable_parameter_spec() = Double("momentum", 0, 0.99);
  *spec.add_parameters() = optimizer;
  *spec.add_parameters() = Double("dropout", 0, 0.5);
  spec.mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  const std::string study =
      CreateStudy(*stub, a, spec, a.name.empty() ? "ctr-curves" : a.name);

  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> noise(0, 0.002);
  std::vector<v1::Trial> trials;
  int succeeded = 0, stopped = 0, infeasible = 0;
  double best = HUGE_VAL;
  for (int i = 0; i < a.trials; ++i) {
    v1::Trial t;
    const double lr = std::pow(10, -4 + 3 * u(rng));
    const int depth = 1 + static_cast<int>(u(rng) * 8) % 8;
    const char* opt = std::array<const char*, 3>{"adam", "sgd", "adagrad"}[static_cast<int>(u(rng) * 3) % 3];
    const double dropout = 0.5 * u(rng);
    auto add = [&](const std::string& name) { auto* p = t.add_parameters(); p->set_name(name); return p; };
    add("lr")->set_double_value(lr);
    add("layers")->set_int_value(depth);
    add("optimizer")->set_string_value(opt);
    double momentum = 0;
    if (std::string(opt) == "sgd") {
      momentum = 0.99 * u(rng);
      add("momentum")->set_double_value(momentum);
    }
    add("dropout")->set_double_value(dropout);
    t.set_client_id("web-seed");
    if (i % 50 == 7) {
      t.set_state(v1::Trial::INFEASIBLE);
      t.set_infeasible_reason("diverged (loss is NaN)");
      ++infeasible;
      trials.push_back(std::move(t));
      continue;
    }
    const double x = std::log10(lr) + 2.5;
    const double final_loss = 0.44 + 0.0125 * x * x + 0.0025 * std::abs(depth - 4) +
                              (std::string(opt) == "sgd" ? 0.01 * (1 - momentum) : 0) +
                              0.02 * dropout + noise(rng);
    const bool early = i % 10 == 9;
    const int steps = early ? a.steps / 2 : a.steps;
    double last = 0;
    for (int s = 1; s <= steps; ++s) {
      auto* m = t.add_measurements();
      m->set_step(s);
      m->set_elapsed_seconds(0.5 * s);
      last = final_loss + 0.3 * std::exp(-4.0 * s / a.steps);
      (*m->mutable_metrics())["logloss"] = last;
    }
    if (early) {
      t.set_state(v1::Trial::STOPPED);
      ++stopped;
    } else {
      t.set_state(v1::Trial::SUCCEEDED);
      (*t.mutable_final_measurement()->mutable_metrics())["logloss"] = last;
      t.mutable_final_measurement()->set_step(steps);
      best = std::min(best, last);
      ++succeeded;
    }
    trials.push_back(std::move(t));
  }
  CreateAll(a, study, trials);
  std::printf(
      "{\"study\":\"%s\",\"trials\":%d,\"succeeded\":%d,\"stopped\":%d,\"infeasible\":%d,"
      "\"curves\":%d,\"steps\":%d,\"best\":%.17g}\n",
      study.c_str(), a.trials, succeeded, stopped, infeasible, succeeded + stopped, a.steps, best);
}

// Two objectives that pull apart: AUC rises with the model's size x, so does latency; y only
// adds latency. The front is the trials with the smallest y for their x.
void Pareto(const Args& a) {
  auto stub = v1::StudyService::NewStub(grpc::CreateChannel(a.server, grpc::InsecureChannelCredentials()));
  v1::StudySpec spec;
  auto* auc = spec.add_metrics();
  auc->set_name("auc");
  auc->set_goal(v1::MetricSpec::MAXIMIZE);
  auto* latency = spec.add_metrics();
  latency->set_name("latency_ms");
  latency->set_goal(v1::MetricSpec::MINIMIZE);
  *spec.add_parameters() = Double("x", 0, 1);
  *spec.add_parameters() = Double("y", 0, 1);
  spec.mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::NSGA2);
  const std::string study = CreateStudy(*stub, a, spec, a.name.empty() ? "ctr-pareto" : a.name);
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<v1::Trial> trials;
  for (int i = 0; i < a.trials; ++i) {
    v1::Trial t;
    const double x = u(rng), y = u(rng);
    auto* px = t.add_parameters();
    px->set_name("x");
    px->set_double_value(x);
    auto* py = t.add_parameters();
    py->set_name("y");
    py->set_double_value(y);
    t.set_state(v1::Trial::SUCCEEDED);
    (*t.mutable_final_measurement()->mutable_metrics())["auc"] = 0.70 + 0.1 * std::sqrt(x);
    (*t.mutable_final_measurement()->mutable_metrics())["latency_ms"] = 5 + 20 * x + 10 * y;
    trials.push_back(std::move(t));
  }
  CreateAll(a, study, trials);
  std::printf("{\"study\":\"%s\",\"trials\":%d}\n", study.c_str(), a.trials);
}

// A study with a budget of 10 core-hours and 13 trials, one at a time (so their end times are
// in id order): one still running (first, while the budget allows it), then 12 that ran 1 to 4
// epochs of 900 s on one core each (a trial's cost: its last measurement's elapsed seconds),
// the loss falling with every epoch; trials 6 and 11 (5th and 10th ended) were stopped after
// one epoch, trial 8 was infeasible after one.
void Budget(const Args& a) {
  auto stub = v1::StudyService::NewStub(grpc::CreateChannel(a.server, grpc::InsecureChannelCredentials()));
  v1::StudySpec spec;
  auto* metric = spec.add_metrics();
  metric->set_name("loss");
  metric->set_goal(v1::MetricSpec::MINIMIZE);
  *spec.add_parameters() = Double("x", 0, 1);
  spec.mutable_algorithm()->set_algorithm(v1::AlgorithmSpec::RANDOM);
  spec.set_budget_core_seconds(36000);
  const std::string study = CreateStudy(*stub, a, spec, a.name.empty() ? "ctr-budget" : a.name);
  double spent = 0;
  auto create = [&](v1::Trial t) {
    t.set_client_id("web-seed");
    grpc::ClientContext ctx;
    Authorize(ctx, a);
    v1::CreateTrialRequest req;
    req.set_parent(study);
    *req.mutable_trial() = std::move(t);
    v1::Trial out;
    Check(stub->CreateTrial(&ctx, req, &out), "CreateTrial");
    spent += out.core_seconds();
  };
  auto trial = [](int i, int epochs) {
    v1::Trial t;
    auto* x = t.add_parameters();
    x->set_name("x");
    x->set_double_value(i / 16.0);
    for (int e = 1; e <= epochs; ++e) {
      auto* m = t.add_measurements();
      m->set_step(e);
      m->set_elapsed_seconds(900.0 * e);
      (*m->mutable_metrics())["loss"] = 0.6 - 0.05 * e + 0.01 * (i % 3);
    }
    return t;
  };
  v1::Trial running = trial(0, 2);
  running.set_state(v1::Trial::ACTIVE);
  create(std::move(running));
  int succeeded = 0, stopped = 0, infeasible = 0;
  for (int i = 1; i <= 12; ++i) {
    const bool early = i == 5 || i == 10, bad = i == 7;
    v1::Trial t = trial(i, early || bad ? 1 : 1 + (i + 1) % 4);
    if (bad) {
      t.set_state(v1::Trial::INFEASIBLE);
      t.set_infeasible_reason("diverged (loss is NaN)");
      ++infeasible;
    } else if (early) {
      t.set_state(v1::Trial::STOPPED);
      ++stopped;
    } else {
      t.set_state(v1::Trial::SUCCEEDED);
      *t.mutable_final_measurement() = t.measurements(t.measurements_size() - 1);
      ++succeeded;
    }
    create(std::move(t));
  }
  std::printf(
      "{\"study\":\"%s\",\"budget_core_seconds\":36000,\"spent_core_seconds\":%.17g,"
      "\"succeeded\":%d,\"stopped\":%d,\"infeasible\":%d,\"running\":1}\n",
      study.c_str(), spent, succeeded, stopped, infeasible);
}

// A serving workload: `instances` replicas, one sample each every 30 s for `minutes` up to now;
// CPU follows a daily-like wave, memory grows slowly.
void Workload(const Args& a) {
  auto stub = v1::AutoscalerService::NewStub(grpc::CreateChannel(a.server, grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    Authorize(ctx, a);
    v1::PutWorkloadRequest req;
    req.mutable_workload()->set_name(a.name);
    req.mutable_workload()->set_target_utilization(0.6);
    req.mutable_workload()->set_min_replicas(1);
    req.mutable_workload()->set_max_replicas(20);
    req.mutable_workload()->set_request_percentile(a.request_percentile);
    if (!a.policy.empty()) {
      v1::Workload::Policy policy;
      if (!v1::Workload::Policy_Parse(a.policy, &policy)) Fail("--policy: want EVOSCALE, VPA or HPA");
      req.mutable_workload()->set_policy(policy);
    }
    v1::Workload out;
    Check(stub->PutWorkload(&ctx, req, &out), "PutWorkload");
  }
  const int64_t now = std::time(nullptr);
  const int64_t start = (now - 60LL * a.minutes) / 60 * 60;  // on a minute: whole buckets
  std::mt19937_64 rng(3);
  std::normal_distribution<double> noise(0, 0.05);
  int samples = 0;
  std::map<int64_t, int> minutes;
  grpc::ClientContext ctx;
  Authorize(ctx, a);
  v1::ReportTelemetryResponse resp;
  auto writer = stub->ReportTelemetry(&ctx, &resp);
  for (int64_t t = start; t < now; t += 30) {
    v1::TelemetryBatch batch;
    const double phase = 2 * M_PI * static_cast<double>(t - start) / 3600.0;
    for (int k = 0; k < a.instances; ++k) {
      auto* s = batch.add_samples();
      s->set_workload(a.name);
      s->set_instance("pod-" + std::to_string(k));
      *s->mutable_time() = google::protobuf::util::TimeUtil::SecondsToTimestamp(t);
      s->set_cpu_cores(std::max(0.05, 1.0 + 0.6 * std::sin(phase) + noise(rng)));
      s->set_memory_bytes((1.5 + 0.1 * static_cast<double>(t - start) / 3600.0 + 0.02 * k) * (1 << 30));
      s->set_qps(std::max(0.0, 200 + 120 * std::sin(phase) + 10 * noise(rng)));
      s->set_latency_seconds(0.004 + 0.002 * std::sin(phase));
      // An online model's replicas: the last one a minute behind the others' sparse rows.
      const bool behind = k + 1 == a.instances && a.instances > 1;
      (*s->mutable_versions())["sparse"] = 100 + (t - start) / 30 - (behind ? 2 : 0);
      (*s->mutable_versions())["dense"] = 1;
      ++samples;
    }
    minutes[t / 60] = 1;
    if (!writer->Write(batch)) break;
  }
  writer->WritesDone();
  Check(writer->Finish(), "ReportTelemetry");
  std::printf("{\"workload\":\"%s\",\"samples\":%d,\"accepted\":%lld,\"minutes\":%zu,\"instances\":%d}\n",
              a.name.c_str(), samples, static_cast<long long>(resp.accepted()), minutes.size(),
              a.instances);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = Parse(argc, argv);
  if (a.scenario == "curves") Curves(a);
  else if (a.scenario == "pareto") Pareto(a);
  else if (a.scenario == "budget") Budget(a);
  else if (a.scenario == "workload") Workload(a);
  else Fail("unknown scenario " + a.scenario + " (want curves, pareto, budget or workload)");
  return 0;
}
