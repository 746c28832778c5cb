// End-to-end: the real `evoscale` CLI against the real evoscaled, both as child processes.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "evoscale/v1/autoscaler.pb.h"
#include "evoscale/v1/study.grpc.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/e2e/evoscaled_process.h"
#include "tests/support/test_support.h"

namespace evoscale {
namespace {

using ::evoscale::testing::AwaitCondition;
using ::evoscale::testing::BinDir;
using ::evoscale::testing::EvoscaledProcess;
using ::evoscale::testing::ReadFile;
using ::evoscale::testing::TempDir;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::SizeIs;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class CliE2eTest : public ::testing::Test {
 protected:
  void StartServer(const std::vector<std::string>& extra = {}) {
    auto p = EvoscaledProcess::Start(dir_.path() + "/evoscale.db", extra);
    ASSERT_TRUE(p.ok()) << p.status();
    server_ = *std::move(p);
  }

  CliResult Cli(const std::vector<std::string>& args) {
    std::string cmd =
        absl::StrCat(Quote(BinDir() + "/evoscale"), " --server ", server_->grpc_address());
    for (const auto& a : args) absl::StrAppend(&cmd, " ", Quote(a));
    const std::string out = dir_.path() + "/out", err = dir_.path() + "/err";
    absl::StrAppend(&cmd, " >", Quote(out), " 2>", Quote(err), " </dev/null");
    CliResult r;
    int status = std::system(cmd.c_str());
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = ReadFile(out);
    r.err = ReadFile(err);
    return r;
  }

  template <typename M>
  M ParseJson(const std::string& json) {
    M m;
    google::protobuf::util::JsonParseOptions opts;
    auto st = google::protobuf::util::JsonStringToMessage(json, &m, opts);
    EXPECT_TRUE(st.ok()) << st.message() << " in " << json;
    return m;
  }

  TempDir dir_;
  std::unique_ptr<EvoscaledProcess> server_;
};

TEST_F(CliE2eTest, DrivesTheExampleStudyToCompletion) {
  StartServer();
  CliResult created = Cli({"study", "create", "-f",
                           std::string(EVOSCALE_SOURCE_DIR) + "/examples/study.yaml", "--json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  v1::Study study = ParseJson<v1::Study>(created.out);
  EXPECT_EQ(study.name(), "studies/1");
  EXPECT_EQ(study.display_name(), "ctr-demo");
  ASSERT_EQ(study.spec().max_trials(), 24);

  int completed = 0;
  for (int round = 0; round < 30; ++round) {
    CliResult s = Cli({"suggest", "studies/1", "--count", "5", "--client-id", "w", "--json"});
    ASSERT_EQ(s.exit_code, 0) << s.err;
    auto resp = ParseJson<v1::SuggestTrialsResponse>(s.out);
    if (resp.trials().empty()) break;
    for (const v1::Trial& t : resp.trials()) {
      CliResult m = Cli({"measure", t.name(), "--step", "10", "logloss=0.9"});
      ASSERT_EQ(m.exit_code, 0) << m.err;
      CliResult c = Cli({"complete", t.name(), "logloss=" + std::to_string(0.4 + t.id() * 0.01)});
      ASSERT_EQ(c.exit_code, 0) << c.err;
      ++completed;
    }
  }
  EXPECT_EQ(completed, 24);

  CliResult got = Cli({"study", "get", "1", "--json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  v1::Study done = ParseJson<v1::Study>(got.out);
  EXPECT_EQ(done.state(), v1::Study::COMPLETED);
  EXPECT_EQ(done.completed_trial_count(), 24);

  // The readable summary shows the conditional child under its parent.
  CliResult summary = Cli({"study", "get", "1"});
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  EXPECT_THAT(summary.out,
              HasSubstr("  ftrl_l1 double [1e-06, 1] LOG when optimizer_sparse in {ftrl}"));

  CliResult optimal = Cli({"optimal", "studies/1", "--json"});
  ASSERT_EQ(optimal.exit_code, 0) << optimal.err;
  auto best = ParseJson<v1::ListOptimalTrialsResponse>(optimal.out);
  ASSERT_THAT(best.optimal_trials(), SizeIs(1));
  EXPECT_EQ(best.optimal_trials(0).id(), 1);  // the lowest logloss was given to trial 1

  CliResult table = Cli({"trials", "list", "studies/1", "--state", "succeeded"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("studies/1/trials/24"));
  EXPECT_THAT(table.out, HasSubstr("SUCCEEDED"));
}

// The habits of the real binary: workers on one host get trials of their own, `study create`
// is get-or-create (ten at once make one study), the nouns take their plural, -o yaml and
// `trial get` show a trial, a stopped trial shows STOPPED, `trial delete` removes it.
TEST_F(CliE2eTest, ConventionsOfTheRealBinary) {
  StartServer();
  CliResult version = Cli({"--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_THAT(version.out, ::testing::MatchesRegex("evoscale [0-9]+\\.[0-9]+\\.[0-9]+\n"));

  // Ten workers run the same `study create` at once: one study.
  const std::string spec = std::string(EVOSCALE_SOURCE_DIR) + "/examples/study.yaml";
  std::string script;
  for (int i = 0; i < 10; ++i) {
    absl::StrAppend(&script, Quote(BinDir() + "/evoscale"), " --server ",
                    server_->grpc_address(), " study create -f ", Quote(spec), " --json > ",
                    Quote(absl::StrCat(dir_.path(), "/create-", i)), " 2>&1 &\n");
  }
  script += "wait\n";
  ASSERT_EQ(std::system(script.c_str()), 0);
  for (int i = 0; i < 10; ++i) {
    const std::string out = ReadFile(absl::StrCat(dir_.path(), "/create-", i));
    EXPECT_EQ(ParseJson<v1::Study>(out).name(), "studies/1") << out;
  }
  CliResult studies = Cli({"studies", "list", "--json"});
  ASSERT_EQ(studies.exit_code, 0) << studies.err;
  EXPECT_THAT(ParseJson<v1::ListStudiesResponse>(studies.out).studies(), SizeIs(1));
  // The same name with another spec: exit 1 with the server's reason.
  const std::string other = dir_.path() + "/other.yaml";
  std::string changed = ReadFile(spec);
  ASSERT_NE(changed.find("max_trials: 24"), std::string::npos);
  changed.replace(changed.find("max_trials: 24"), 14, "max_trials: 5");
  std::ofstream(other) << changed;
  CliResult clash = Cli({"study", "create", "-f", other});
  EXPECT_EQ(clash.exit_code, 1);
  EXPECT_THAT(clash.err, HasSubstr("ALREADY_EXISTS"));
  EXPECT_THAT(clash.err, HasSubstr("max_trials is modified"));

  // Two workers on this host, each its own process and client id: two different trials.
  CliResult first = Cli({"trial", "suggest", "1", "--json"});
  CliResult second = Cli({"trial", "suggest", "1", "--json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const v1::Trial a = ParseJson<v1::SuggestTrialsResponse>(first.out).trials(0);
  const v1::Trial b = ParseJson<v1::SuggestTrialsResponse>(second.out).trials(0);
  EXPECT_NE(a.name(), b.name());
  EXPECT_NE(a.client_id(), b.client_id());
  EXPECT_THAT(a.client_id(), ::testing::StartsWith("cli-"));

  // Stopped early, then completed: STOPPED in `trial get`, as a table and as YAML.
  ASSERT_EQ(Cli({"trial", "measure", a.name(), "--step", "5", "logloss=0.3"}).exit_code, 0);
  ASSERT_EQ(Cli({"trial", "stop", a.name()}).exit_code, 0);
  ASSERT_EQ(Cli({"trial", "complete", a.name()}).exit_code, 0);
  CliResult shown = Cli({"trials", "get", a.name()});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_THAT(shown.out, HasSubstr("STOPPED"));
  EXPECT_THAT(shown.out, HasSubstr("step 5: logloss=0.3"));
  CliResult yaml = Cli({"trial", "get", a.name(), "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, HasSubstr("state: STOPPED\n"));
  EXPECT_THAT(yaml.out, HasSubstr("name: studies/1/trials/"));
  CliResult study_yaml = Cli({"study", "get", "1", "-o", "yaml"});
  EXPECT_THAT(study_yaml.out, HasSubstr("display_name: ctr-demo\n"));

  ASSERT_EQ(Cli({"trial", "delete", b.name()}).exit_code, 0);
  CliResult gone = Cli({"trial", "get", b.name()});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_THAT(gone.err, HasSubstr("NOT_FOUND"));
}

// A managed study: examples/managed_study.yaml through the CLI, and evoscaled runs every trial
// itself as the real evoscale-trainer (found in its PATH, as scripts/dev.sh demo arranges).
TEST_F(CliE2eTest, RunsTheManagedExampleStudyWithTheRealTrainer) {
  const std::string path = absl::StrCat(BinDir(), ":", getenv("PATH") ? getenv("PATH") : "");
  ASSERT_EQ(setenv("PATH", path.c_str(), 1), 0);  // evoscaled (our child) inherits it
  StartServer({"--max-running-trials", "2"});
  CliResult created =
      Cli({"study", "create", "-f",
           std::string(EVOSCALE_SOURCE_DIR) + "/examples/managed_study.yaml", "--json"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const v1::Study study = ParseJson<v1::Study>(created.out);
  const double budget = study.spec().budget_core_seconds();
  ASSERT_GT(budget, 0);
  ASSERT_GT(study.spec().early_stopping().max_step(), 0);
  // It runs until its budget is spent and the trials running then have finished.
  v1::Study now;
  AwaitCondition(
      [&] {
        CliResult got = Cli({"study", "get", study.name(), "--json"});
        EXPECT_EQ(got.exit_code, 0) << got.err;
        now = ParseJson<v1::Study>(got.out);
        return got.exit_code != 0 || (now.state() == v1::Study::COMPLETED &&
                                      now.completed_trial_count() == now.trial_count());
      },
      absl::Minutes(5), absl::Milliseconds(250));
  ASSERT_EQ(now.state(), v1::Study::COMPLETED) << now.ShortDebugString();
  CliResult list = Cli({"trials", "list", study.name(), "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto trials = ParseJson<v1::ListTrialsResponse>(list.out);
  ASSERT_EQ(trials.trials_size(), now.trial_count());
  double spent = 0, most = 0;
  for (const v1::Trial& t : trials.trials()) {
    spent += t.core_seconds();
    most = std::max(most, t.core_seconds());
  }
  EXPECT_NEAR(spent, now.spent_core_seconds(), 1e-6);
  // Never overspent by more than the trials running when it ran out (2 at once).
  EXPECT_LE(now.spent_core_seconds(), budget + 2 * most);
  int ran_to_the_end = 0, learned = 0;
  double best = 0, worst = 1;
  for (const v1::Trial& t : trials.trials()) {
    // Every trial trained, none failed: SUCCEEDED, or STOPPED early by COST_AWARE (its last
    // progress measurement is final).
    ASSERT_THAT(t.state(), AnyOf(v1::Trial::SUCCEEDED, v1::Trial::STOPPED)) << t.ShortDebugString();
    if (t.state() == v1::Trial::STOPPED) {
      EXPECT_FALSE(t.final_measurement().metrics().contains("evoscale/peak_rss_bytes"));
    }
    EXPECT_THAT(t.client_id(), HasSubstr("evoscaled/slot-"));
    EXPECT_GE(t.measurements_size(), 1) << t.name();
    const double auc = t.final_measurement().metrics().at("auc");
    EXPECT_GT(auc, 0.0);
    EXPECT_LT(auc, 1.0);
    best = std::max(best, auc);
    worst = std::min(worst, auc);
    // Requested and used, whatever the ending; the template asks 1 GiB until three trials
    // have run to their end, then the requests are learned.
    EXPECT_GT(t.usage().peak_memory_bytes(), 0) << t.ShortDebugString();
    EXPECT_GT(t.resources().memory_bytes(), 0) << t.ShortDebugString();
    learned += t.resources().memory_bytes() != int64_t{1} << 30 ? 1 : 0;
    if (t.final_measurement().metrics().contains("evoscale/peak_rss_bytes")) {
      ++ran_to_the_end;
      EXPECT_GT(t.final_measurement().metrics().at("evoscale/peak_rss_bytes"), 1e6);
    }
  }
  EXPECT_GE(ran_to_the_end, 1);
  EXPECT_GE(learned, 1);
  // The study learns: its best trial is clearly better than its worst.
  EXPECT_GT(best - worst, 0.05) << "best AUC " << best << ", worst " << worst;
  // The table shows requested vs used, and what each trial cost.
  CliResult table = Cli({"trials", "list", study.name()});
  EXPECT_THAT(table.out, HasSubstr("MEMORY REQUESTED / PEAK"));
  EXPECT_THAT(table.out, HasSubstr("CORE-SECONDS"));
  // `study get` shows the early stopping and the trial template.
  CliResult summary = Cli({"study", "get", study.name()});
  EXPECT_THAT(summary.out, HasSubstr("early_stopping:"));
  EXPECT_THAT(summary.out, HasSubstr("COST_AWARE (default with a budget), max_step 352"));
  EXPECT_THAT(summary.out, HasSubstr("budget:"));
  EXPECT_THAT(summary.out, HasSubstr("command:"));
  EXPECT_THAT(summary.out, HasSubstr("evoscale-trainer --synthetic 200000"));
  EXPECT_THAT(summary.out, HasSubstr("cpu 1, memory 1024 MiB, gpus 0 (until right-sized)"));
  CliResult optimal = Cli({"optimal", study.name(), "--json"});
  ASSERT_EQ(optimal.exit_code, 0) << optimal.err;
  EXPECT_THAT(ParseJson<v1::ListOptimalTrialsResponse>(optimal.out).optimal_trials(), SizeIs(1));
}

// `workload put` updates: the settings not given keep their values (it used to replace the
// workload, wiping its policy and target); `recommend` without samples says so.
TEST_F(CliE2eTest, WorkloadPutUpdatesOnlyWhatItIsGivenAndRecommendWaitsForSamples) {
  StartServer();
  CliResult first = Cli({"workload", "put", "default/ranker", "--policy", "vpa",
                         "--target-utilization", "0.6", "--min-replicas", "2"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  CliResult second = Cli({"workload", "put", "default/ranker", "--max-replicas", "10"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  CliResult got = Cli({"workload", "get", "default/ranker", "--json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  const v1::Workload w = ParseJson<v1::Workload>(got.out);
  EXPECT_EQ(w.policy(), v1::Workload::VPA);
  EXPECT_DOUBLE_EQ(w.target_utilization(), 0.6);
  EXPECT_EQ(w.min_replicas(), 2);
  EXPECT_EQ(w.max_replicas(), 10);
  CliResult recommend = Cli({"recommend", "default/ranker"});
  EXPECT_EQ(recommend.exit_code, 1);
  EXPECT_THAT(recommend.err, HasSubstr("no samples yet"));
  EXPECT_THAT(recommend.err, HasSubstr("default/ranker"));
}

// `telemetry send`: a newcomer without grpcurl can feed the autoscaler a CSV or JSON-lines
// file and get a recommendation; bad lines are named, rejected samples counted by reason.
TEST_F(CliE2eTest, TelemetrySendFeedsTheAutoscalerFromCsvAndJsonLines) {
  StartServer();
  ASSERT_EQ(Cli({"workload", "put", "default/ranker"}).exit_code, 0);
  const int64_t now = static_cast<int64_t>(time(nullptr));
  const std::string csv = dir_.path() + "/samples.csv";
  {
    std::ofstream out(csv);
    out << "# a comment\ninstance,timestamp,cpu_cores,memory_bytes\n";
    for (int i = 0; i < 30; ++i) {
      out << "pod-1," << now - 300 + 10 * i << "," << 1.0 + 0.01 * i << ",2000000000\n";
    }
  }
  CliResult sent = Cli({"telemetry", "send", csv, "--workload", "default/ranker"});
  ASSERT_EQ(sent.exit_code, 0) << sent.err;
  EXPECT_THAT(sent.out, HasSubstr("sent 30 samples: 30 accepted, 0 rejected"));
  CliResult rec = Cli({"recommend", "default/ranker", "--json"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  EXPECT_GT(ParseJson<v1::Recommendation>(rec.out).memory_bytes().target(), 1.9e9);

  const std::string jsonl = dir_.path() + "/samples.jsonl";
  std::ofstream(jsonl) << "{\"workload\":\"default/ranker\",\"instance\":\"pod-2\",\"timestamp\":"
                       << now << ",\"cpu_cores\":1}\n"
                       << "{\"workload\":\"default/nothing\",\"instance\":\"pod-2\","
                          "\"timestamp\":"
                       << now << ",\"cpu_cores\":1}\n";
  CliResult partly = Cli({"telemetry", "send", jsonl});
  EXPECT_EQ(partly.exit_code, 1);
  EXPECT_THAT(partly.out, HasSubstr("1 accepted, 1 rejected"));
  EXPECT_THAT(partly.out, HasSubstr("unknown_workload: 1"));

  const std::string bad = dir_.path() + "/bad.csv";
  std::ofstream(bad) << "workload,timestamp,cpu_cores\ndefault/ranker,1,x\n";
  CliResult invalid = Cli({"telemetry", "send", bad});
  EXPECT_EQ(invalid.exit_code, 2);
  EXPECT_THAT(invalid.err, HasSubstr("bad.csv:2: cpu_cores: \"x\" is not a number"));
  std::ofstream(bad) << "workload,cpu\n";
  invalid = Cli({"telemetry", "send", bad});
  EXPECT_EQ(invalid.exit_code, 2);
  EXPECT_THAT(invalid.err, HasSubstr("column \"cpu\" is not a TelemetrySample field"));
}

TEST_F(CliE2eTest, ServerErrorsExitOneAndUsageErrorsExitTwo) {
  StartServer();
  CliResult missing = Cli({"study", "get", "studies/99"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(missing.err, HasSubstr("studies/99"));

  const std::string bad = dir_.path() + "/bad.yaml";
  std::ofstream(bad) << "spec:\n  metrics: []\n  parameters:\n    - name: x\n      double_spec: "
                        "{min: 5, max: 1}\n";
  CliResult invalid = Cli({"study", "create", "-f", bad});
  EXPECT_EQ(invalid.exit_code, 1);
  EXPECT_THAT(invalid.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(invalid.err, HasSubstr("spec.metrics"));

  CliResult nofile = Cli({"study", "create", "-f", dir_.path() + "/absent.yaml"});
  EXPECT_EQ(nofile.exit_code, 2);
  EXPECT_THAT(nofile.err, HasSubstr("absent.yaml"));

  CliResult list = Cli({"study", "list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
}

TEST_F(CliE2eTest, TokensAreCheckedByRole) {
  const std::string tokens = dir_.path() + "/tokens";
  std::ofstream(tokens) << "# token role\nreader-0123456789abcdef reader\n"
                        << "writer-0123456789abcdef writer\n";
  StartServer({"--auth-tokens", tokens});
  const std::string spec = std::string(EVOSCALE_SOURCE_DIR) + "/examples/study.yaml";

  CliResult anonymous = Cli({"study", "list"});
  EXPECT_EQ(anonymous.exit_code, 1);
  EXPECT_THAT(anonymous.err, HasSubstr("UNAUTHENTICATED"));

  CliResult wrong = Cli({"--token", "not-a-token-at-all", "study", "list"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("UNAUTHENTICATED"));

  CliResult reader = Cli({"--token", "reader-0123456789abcdef", "study", "create", "-f", spec});
  EXPECT_EQ(reader.exit_code, 1);
  EXPECT_THAT(reader.err, HasSubstr("PERMISSION_DENIED"));

  CliResult writer = Cli({"--token", "writer-0123456789abcdef", "study", "create", "-f", spec});
  EXPECT_EQ(writer.exit_code, 0) << writer.err;

  CliResult reader_list = Cli({"--token", "reader-0123456789abcdef", "study", "list"});
  EXPECT_EQ(reader_list.exit_code, 0) << reader_list.err;
  EXPECT_THAT(reader_list.out, HasSubstr("ctr-demo"));

  CliResult writer_delete = Cli({"--token", "writer-0123456789abcdef", "study", "delete", "1"});
  EXPECT_EQ(writer_delete.exit_code, 1);
  EXPECT_THAT(writer_delete.err, HasSubstr("PERMISSION_DENIED"));
}

// `admin backup` while a writer keeps completing trials: the copy is one consistent snapshot.
// Restored (evoscaled started on the copy), the quiet study, its trials and the workload are
// identical; the busy study holds every completion acknowledged before the backup began, and
// each trial it holds as SUCCEEDED is the one the source holds.
TEST_F(CliE2eTest, BackupWhileServingRestoresIdenticalStudiesAndTheWorkload) {
  const std::string tokens = dir_.path() + "/tokens";
  std::ofstream(tokens) << "admin-0123456789abcdef admin\nwriter-0123456789abcdef writer\n";
  StartServer({"--auth-tokens", tokens});
  const std::vector<std::string> admin = {"--token", "admin-0123456789abcdef"};
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), admin.begin(), admin.end());
    return Cli(args);
  };
  const std::string spec = std::string(EVOSCALE_SOURCE_DIR) + "/examples/study.yaml";
  ASSERT_EQ(cli({"study", "create", "-f", spec, "--name", "quiet"}).exit_code, 0);  // studies/1
  ASSERT_EQ(cli({"study", "create", "-f", spec, "--name", "busy"}).exit_code, 0);   // studies/2
  CliResult suggested = cli({"suggest", "studies/1", "--count", "6", "--json"});
  ASSERT_EQ(suggested.exit_code, 0) << suggested.err;
  const auto suggestion = ParseJson<v1::SuggestTrialsResponse>(suggested.out);
  ASSERT_EQ(suggestion.trials_size(), 6);
  for (int i = 0; i < 4; ++i) {  // two stay ACTIVE
    const v1::Trial& t = suggestion.trials(i);
    CliResult c = cli({"complete", t.name(), "logloss=" + std::to_string(0.3 + 0.01 * t.id())});
    ASSERT_EQ(c.exit_code, 0) << c.err;
  }
  ASSERT_EQ(cli({"workload", "put", "default/ranker", "--policy", "vpa"}).exit_code, 0);
  const std::string csv = dir_.path() + "/samples.csv";
  {
    const int64_t now = static_cast<int64_t>(time(nullptr));
    std::ofstream out(csv);
    out << "instance,timestamp,cpu_cores,memory_bytes\n";
    for (int i = 0; i < 40; ++i) out << "pod-1," << now - 400 + 10 * i << ",1.5,2e9\n";
  }
  ASSERT_EQ(cli({"telemetry", "send", csv, "--workload", "default/ranker"}).exit_code, 0);
  auto dump = [&](const std::vector<std::string>& args) {
    CliResult r = cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string study1 = dump({"study", "get", "1", "--json"});
  const std::string trials1 = dump({"trials", "list", "1", "--json"});
  const std::string workload = dump({"workload", "get", "default/ranker", "--json"});
  const std::string recommendation = dump({"recommend", "default/ranker", "--json"});

  // The writer: ask and tell on studies/2 until stopped, counting acknowledged completions.
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::thread writer([&] {
    auto stub = server_->NewStub();
    for (int i = 0; !stop; ++i) {
      grpc::ClientContext suggest_ctx;
      suggest_ctx.AddMetadata("authorization", "Bearer writer-0123456789abcdef");
      v1::SuggestTrialsRequest req;
      req.set_parent("studies/2");
      req.set_client_id(absl::StrCat("w", i));
      req.set_suggestion_count(1);
      v1::SuggestTrialsResponse resp;
      if (!stub->SuggestTrials(&suggest_ctx, req, &resp).ok() || resp.trials_size() != 1) break;
      grpc::ClientContext complete_ctx;
      complete_ctx.AddMetadata("authorization", "Bearer writer-0123456789abcdef");
      v1::CompleteTrialRequest complete;
      complete.set_name(resp.trials(0).name());
      (*complete.mutable_final_measurement()->mutable_metrics())["logloss"] = 0.5;
      v1::Trial done;
      if (!stub->CompleteTrial(&complete_ctx, complete, &done).ok()) break;
      ++acknowledged;
    }
  });
  AwaitCondition([&] { return acknowledged >= 5; }, absl::Seconds(60));
  const int before = acknowledged;
  const std::string backup = dir_.path() + "/backup.db";
  CliResult made = cli({"admin", "backup", backup});
  stop = true;
  writer.join();
  ASSERT_EQ(made.exit_code, 0) << made.err;
  EXPECT_THAT(made.out, HasSubstr("backup: " + backup));
  const std::string busy_source = dump({"trials", "list", "2", "--json"});

  // A second backup to the same path is refused; a reader may not take one.
  CliResult again = cli({"admin", "backup", backup});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("exists; a backup goes to new files"));
  CliResult writer_backup =
      Cli({"--token", "writer-0123456789abcdef", "admin", "backup", dir_.path() + "/w.db"});
  EXPECT_EQ(writer_backup.exit_code, 1);
  EXPECT_THAT(writer_backup.err, HasSubstr("PERMISSION_DENIED"));

  // Restore: evoscaled on the copy.
  server_->Stop(SIGTERM);
  auto restored = EvoscaledProcess::Start(backup, {"--auth-tokens", tokens});
  ASSERT_TRUE(restored.ok()) << restored.status();
  server_ = *std::move(restored);
  EXPECT_EQ(dump({"study", "get", "1", "--json"}), study1);
  EXPECT_EQ(dump({"trials", "list", "1", "--json"}), trials1);
  EXPECT_EQ(dump({"workload", "get", "default/ranker", "--json"}), workload);
  EXPECT_EQ(dump({"recommend", "default/ranker", "--json"}), recommendation);
  std::map<int64_t, v1::Trial> source_trials;
  const auto source_list = ParseJson<v1::ListTrialsResponse>(busy_source);
  for (const v1::Trial& t : source_list.trials()) {
    source_trials[t.id()] = t;
  }
  int succeeded = 0;
  const auto restored_list =
      ParseJson<v1::ListTrialsResponse>(dump({"trials", "list", "2", "--json"}));
  for (const v1::Trial& t : restored_list.trials()) {
    ASSERT_TRUE(source_trials.contains(t.id())) << t.name();
    if (t.state() != v1::Trial::SUCCEEDED) continue;
    ++succeeded;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(t, source_trials[t.id()]))
        << t.DebugString() << " vs " << source_trials[t.id()].DebugString();
  }
  EXPECT_GE(succeeded, before);
  EXPECT_LE(succeeded, acknowledged.load());
}

TEST(CliReplayTest, ReplaysBitbrainsThroughEachPolicyAsJson) {
  const std::string traces = std::string(EVOSCALE_SOURCE_DIR) + "/../shared/data/traces";
  if (access((traces + "/bitbrains-rnd-2013-7/1.csv").c_str(), R_OK) != 0) {
    GTEST_SKIP() << "../shared/data is absent: no Bitbrains trace to replay";
  }
  TempDir dir;
  for (const std::string policy : {"evoscale", "vpa"}) {
    const std::string out = absl::StrCat(dir.path(), "/", policy, ".json");
    const std::string cmd =
        absl::StrCat(BinDir(), "/evoscale replay --trace bitbrains --path ", traces,
                     "/bitbrains-rnd-2013-7/1.csv --policy ", policy, " --json >", out);
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    const std::string json = ReadFile(out);
    for (const char* field :
         {"\"relative_slack_cpu\":", "\"relative_slack_memory\":", "\"oom_events\":",
          "\"underprovisioned_fraction\":", "\"changes\":"}) {
      EXPECT_THAT(json, HasSubstr(field)) << policy;
    }
    EXPECT_THAT(json, HasSubstr(absl::StrCat("\"policy\":\"", policy, "\"")));
  }
  // A policy that does not apply to the trace is a usage error that names it.
  const std::string err = dir.path() + "/err";
  const std::string bad = BinDir() + "/evoscale replay --trace bitbrains --path " + traces +
                          "/bitbrains-rnd-2013-7 --policy hpa 2>" + err;
  const int status = std::system(bad.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_THAT(ReadFile(err), HasSubstr("hpa"));
}

}  // namespace
}  // namespace evoscale
