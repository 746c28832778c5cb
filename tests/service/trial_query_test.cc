// Tests of the dashboard's trial table query (service/study/trial_query.h) on trials built as
// protos: every sort key both ways, filters by state and parameter, paging, and every rule of
// the query's parsing with its exact message.
#include "service/study/trial_query.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "evoscale/v1/study.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace evoscale::service {
namespace {

using ::absl::StrCat;
using ::evoscale::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

using Query = std::vector<std::pair<std::string, std::string>>;

// Conditional parameters at two depths: "schedule" exists only when layers is 2, "cycles" only
// when schedule is also "cosine", "momentum" only when optimizer is "sgd". The optimizer's
// values are listed out of alphabetical order on purpose (a sort is by their text).
constexpr char kSpec[] = R"pb(
  metrics { name: "loss" goal: MINIMIZE }
  parameters {
    name: "lr"
    double_spec { min: 0.0001 max: 1 }
    scale: LOG
  }
  parameters {
    name: "layers"
    integer_spec { min: 1 max: 8 }
    children {
      parent_int_values: 2
      parameter_spec {
        name: "schedule"
        categorical_spec { values: "constant" values: "cosine" }
        children {
          parent_categorical_values: "cosine"
          parameter_spec {
            name: "cycles"
            integer_spec { min: 1 max: 4 }
          }
        }
      }
    }
  }
  parameters {
    name: "batch"
    discrete_spec { values: 32 values: 64 values: 128 }
  }
  parameters {
    name: "optimizer"
    categorical_spec { values: "sgd" values: "adam" values: "rmsprop" values: "adagrad" }
    children {
      parent_categorical_values: "sgd"
      parameter_spec {
        name: "momentum"
        double_spec { min: 0 max: 1 }
      }
    }
  }
)pb";

constexpr char kAllParameters[] =
    R"("lr", "layers", "schedule", "cycles", "batch", "optimizer", "momentum")";

v1::StudySpec Spec() {
  v1::StudySpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(kSpec, &spec));
  return spec;
}

v1::Trial MakeTrial(int64_t id, v1::Trial::State state) {
  v1::Trial t;
  t.set_name(absl::StrCat("studies/1/trials/", id));
  t.set_id(id);
  t.set_state(state);
  return t;
}

void SetDouble(v1::Trial* t, const std::string& name, double value) {
  v1::Parameter* p = t->add_parameters();
  p->set_name(name);
  p->set_double_value(value);
}

void SetInt(v1::Trial* t, const std::string& name, int64_t value) {
  v1::Parameter* p = t->add_parameters();
  p->set_name(name);
  p->set_int_value(value);
}

void SetString(v1::Trial* t, const std::string& name, const std::string& value) {
  v1::Parameter* p = t->add_parameters();
  p->set_name(name);
  p->set_string_value(value);
}

// The ids of a page's trials, in its order.
std::vector<int64_t> Ids(const TrialPage& page) {
  std::vector<int64_t> ids;
  for (const v1::Trial* t : page.trials) ids.push_back(t->id());
  return ids;
}

// Parses `query` (which must be valid) and runs it.
TrialPage RunQuery(const v1::StudySpec& spec, const std::vector<v1::Trial>& trials,
                   const Query& query) {
  absl::StatusOr<TrialQuery> q = ParseTrialQuery(spec, query);
  EXPECT_TRUE(q.ok()) << q.status();
  if (!q.ok()) return {};
  return QueryTrials(spec, trials, *q);
}

class TrialQueryTest : public ::testing::Test {
 protected:
  const v1::StudySpec spec_ = Spec();
};

// ---- Sorting -------------------------------------------------------------------------------

// Six live trials and a tombstone. Each sort key gets, by id 1..6, the ranks 3, 1, (none), 2,
// 1, 0: ascending that is 6, then the tie 2 and 5, then 4, 1, and 3 (which lacks the key) last.
constexpr int kLacks = -1;
constexpr int kRanks[] = {3, 1, kLacks, 2, 1, 0};
const std::vector<int64_t> kAscending = {6, 2, 5, 4, 1, 3};
const std::vector<int64_t> kDescending = {1, 4, 2, 5, 6, 3};

struct SortCase {
  std::string name;      // the test's name
  std::string order_by;  // without the '-'
  // Gives the trial the key of rank `rank` (0 is the smallest), or none for kLacks.
  std::function<void(v1::Trial*, int)> set_key;
};

// gtest names the case in a failure's message.
void PrintTo(const SortCase& c, std::ostream* os) { *os << "order_by " << c.order_by; }

class SortKeyTest : public TrialQueryTest, public ::testing::WithParamInterface<SortCase> {
 protected:
  std::vector<v1::Trial> Trials() const {
    std::vector<v1::Trial> trials;
    for (int64_t id = 1; id <= 6; ++id) {
      trials.push_back(MakeTrial(id, v1::Trial::SUCCEEDED));
      GetParam().set_key(&trials.back(), kRanks[id - 1]);
    }
    trials.push_back(MakeTrial(7, v1::Trial::STATE_UNSPECIFIED));  // deleted
    GetParam().set_key(&trials.back(), 0);
    return trials;
  }
};

TEST_P(SortKeyTest, AscendingTiesByIdAndTheTrialLackingTheKeyLast) {
  const std::vector<v1::Trial> trials = Trials();  // the page points into them
  const TrialPage page = RunQuery(spec_, trials, {{"order_by", GetParam().order_by}});
  EXPECT_THAT(Ids(page), ElementsAreArray(kAscending));
  EXPECT_EQ(page.total_matching, 6);
}

TEST_P(SortKeyTest, DescendingTiesStillByIdAscendingAndTheTrialLackingTheKeyStillLast) {
  const std::vector<v1::Trial> trials = Trials();
  const TrialPage page = RunQuery(spec_, trials, {{"order_by", "-" + GetParam().order_by}});
  EXPECT_THAT(Ids(page), ElementsAreArray(kDescending));
}

const std::string kCategoriesInTextOrder[] = {"adagrad", "adam", "rmsprop", "sgd"};

INSTANTIATE_TEST_SUITE_P(
    EveryKeyButIdAndState, SortKeyTest,
    ::testing::Values(SortCase{"client", "client",
                               [](v1::Trial* t, int rank) {
                                 // A trial no client holds (REQUESTED) has an empty client_id.
                                 if (rank != kLacks)
                                   t->set_client_id(absl::StrCat("worker-", rank));
                               }},
                      SortCase{"metric", "metric:loss",
                               [](v1::Trial* t, int rank) {
                                 // Intermediate values do not count: only the final measurement.
                                 (*t->add_measurements()->mutable_metrics())["loss"] = -100;
                                 if (rank != kLacks) {
                                   (*t->mutable_final_measurement()->mutable_metrics())["loss"] =
                                       0.5 * rank;
                                 }
                               }},
                      SortCase{"double_param", "param:lr",
                               [](v1::Trial* t, int rank) {
                                 SetInt(t, "layers", 1);
                                 if (rank != kLacks) SetDouble(t, "lr", 0.001 * (rank + 1));
                               }},
                      SortCase{"integer_param", "param:layers",
                               [](v1::Trial* t, int rank) {
                                 if (rank != kLacks) SetInt(t, "layers", rank + 1);
                               }},
                      SortCase{"discrete_param", "param:batch",
                               [](v1::Trial* t, int rank) {
                                 if (rank != kLacks) SetDouble(t, "batch", 32 << rank);
                               }},
                      SortCase{"categorical_param_by_text", "param:optimizer",
                               [](v1::Trial* t, int rank) {
                                 if (rank != kLacks)
                                   SetString(t, "optimizer", kCategoriesInTextOrder[rank]);
                               }},
                      SortCase{"conditional_param", "param:momentum",
                               [](v1::Trial* t, int rank) {
                                 SetString(t, "optimizer", rank == kLacks ? "adam" : "sgd");
                                 if (rank != kLacks) SetDouble(t, "momentum", 0.25 * rank);
                               }},
                      SortCase{"nested_conditional_param", "param:cycles",
                               [](v1::Trial* t, int rank) {
                                 SetInt(t, "layers", 2);
                                 SetString(t, "schedule", rank == kLacks ? "constant" : "cosine");
                                 if (rank != kLacks) SetInt(t, "cycles", rank + 1);
                               }},
                      SortCase{"start_time", "start_time",
                               [](v1::Trial* t, int rank) {
                                 if (rank == kLacks) return;
                                 t->mutable_start_time()->set_seconds(1700000000 + rank / 2);
                                 t->mutable_start_time()->set_nanos(rank % 2);
                               }},
                      SortCase{"end_time", "end_time",
                               [](v1::Trial* t, int rank) {
                                 t->mutable_start_time()->set_seconds(
                                     1600000000);  // running: no end yet
                                 if (rank != kLacks)
                                   t->mutable_end_time()->set_seconds(1700000000 + rank);
                               }},
                      SortCase{"memory_requested", "memory_requested",
                               [](v1::Trial* t, int rank) {
                                 // The service sets resources on every trial: no request is 0
                                 // bytes.
                                 t->mutable_resources()->set_cpu_cores(1);
                                 if (rank != kLacks)
                                   t->mutable_resources()->set_memory_bytes(int64_t{1}
                                                                            << (30 + rank));
                               }},
                      SortCase{"memory_peak", "memory_peak",
                               [](v1::Trial* t, int rank) {
                                 if (rank != kLacks)
                                   t->mutable_usage()->set_peak_memory_bytes((rank + 1) * 1000);
                               }},
                      SortCase{"cpu_requested", "cpu_requested",
                               [](v1::Trial* t, int rank) {
                                 t->mutable_resources()->set_memory_bytes(1 << 20);
                                 if (rank != kLacks)
                                   t->mutable_resources()->set_cpu_cores(0.5 * (rank + 1));
                               }},
                      SortCase{"cpu_used", "cpu_used",
                               [](v1::Trial* t, int rank) {
                                 if (rank == kLacks) {
                                   // A trial re-run after an OOM kill has usage with only
                                   // oom_kills: not measured yet.
                                   t->mutable_usage()->set_oom_kills(1);
                                   return;
                                 }
                                 // Rank 0 used no CPU at all (it slept), which is a measured 0.
                                 t->mutable_usage()->set_wall_seconds(10);
                                 t->mutable_usage()->set_cpu_seconds(5.0 * rank);
                                 t->mutable_usage()->set_mean_cpu_cores(0.5 * rank);
                               }}),
    [](const ::testing::TestParamInfo<SortCase>& info) { return info.param.name; });

TEST_F(TrialQueryTest, IdSortsBothWays) {
  std::vector<v1::Trial> trials;
  for (int64_t id : {3, 1, 2}) trials.push_back(MakeTrial(id, v1::Trial::ACTIVE));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {})), ElementsAre(1, 2, 3));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "id"}})), ElementsAre(1, 2, 3));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "-id"}})), ElementsAre(3, 2, 1));
}

TEST_F(TrialQueryTest, StateSortsInTheLifecycleOrderWithTiesById) {
  std::vector<v1::Trial> trials = {
      MakeTrial(1, v1::Trial::STOPPED),    MakeTrial(2, v1::Trial::ACTIVE),
      MakeTrial(3, v1::Trial::SUCCEEDED),  MakeTrial(4, v1::Trial::REQUESTED),
      MakeTrial(5, v1::Trial::ACTIVE),     MakeTrial(6, v1::Trial::FAILED),
      MakeTrial(7, v1::Trial::INFEASIBLE), MakeTrial(8, v1::Trial::STOPPING)};
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "state"}})),
              ElementsAre(4, 2, 5, 8, 3, 7, 6, 1));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "-state"}})),
              ElementsAre(1, 6, 7, 3, 8, 2, 5, 4));
}

TEST_F(TrialQueryTest, SortIgnoresTheOrderTrialsAreGivenIn) {
  std::vector<v1::Trial> trials;
  for (int64_t id : {5, 2, 4, 1, 3}) {
    trials.push_back(MakeTrial(id, v1::Trial::SUCCEEDED));
    SetInt(&trials.back(), "layers", id % 2);  // 1, 3, 5 have 1; 2 and 4 have 0
  }
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "param:layers"}})),
              ElementsAre(2, 4, 1, 3, 5));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "-param:layers"}})),
              ElementsAre(1, 3, 5, 2, 4));
}

TEST_F(TrialQueryTest, AParameterValueTheSpecDoesNotAllowSortsLast) {
  std::vector<v1::Trial> trials = {MakeTrial(1, v1::Trial::SUCCEEDED),
                                   MakeTrial(2, v1::Trial::SUCCEEDED),
                                   MakeTrial(3, v1::Trial::SUCCEEDED)};
  SetString(&trials[0], "optimizer", "adamw");  // not a value of the spec
  SetString(&trials[1], "optimizer", "sgd");
  SetString(&trials[2], "optimizer", "adam");
  SetString(&trials[0], "lr", "fast");  // a string for a number
  SetDouble(&trials[1], "lr", 0.1);
  SetInt(&trials[2], "lr", 1);  // an integer for a double: still a number
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "param:optimizer"}})),
              ElementsAre(3, 2, 1));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "-param:optimizer"}})),
              ElementsAre(2, 3, 1));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "-param:lr"}})), ElementsAre(3, 2, 1));
}

TEST_F(TrialQueryTest, TrialsListingTheirParametersInAnyOrderAreAllFound) {
  std::vector<v1::Trial> trials;
  for (int64_t id = 1; id <= 4; ++id) {
    trials.push_back(MakeTrial(id, v1::Trial::SUCCEEDED));
    v1::Trial& t = trials.back();
    // Each trial lists lr at another place: first, second, third, or not at all.
    if (id == 1) SetDouble(&t, "lr", 0.4);
    SetInt(&t, "layers", 1);
    if (id == 2) SetDouble(&t, "lr", 0.3);
    SetString(&t, "optimizer", "adam");
    if (id == 3) SetDouble(&t, "lr", 0.2);
  }
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"order_by", "param:lr"}})), ElementsAre(3, 2, 1, 4));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"param", "lr:0.25.."}, {"param", "layers:1..1"}})),
              ElementsAre(1, 2));
}

TEST_F(TrialQueryTest, AHandMadeQueryWithAKeyParsingRejectsSortsByIdAndClampsThePage) {
  std::vector<v1::Trial> trials;
  for (int64_t id : {3, 1, 2}) trials.push_back(MakeTrial(id, v1::Trial::ACTIVE));
  TrialQuery q;
  q.order_by = "param:nope";
  q.descending = true;
  q.page_size = 0;
  q.offset = -5;
  const TrialPage page = QueryTrials(spec_, trials, q);
  EXPECT_THAT(Ids(page), ElementsAre(1));
  EXPECT_EQ(page.next_page_token, "o:1:3");
}

// ---- Filtering -----------------------------------------------------------------------------

TEST_F(TrialQueryTest, TombstonesAreNeverListedNorCounted) {
  std::vector<v1::Trial> trials = {MakeTrial(1, v1::Trial::SUCCEEDED),
                                   MakeTrial(2, v1::Trial::STATE_UNSPECIFIED),
                                   MakeTrial(3, v1::Trial::ACTIVE)};
  SetDouble(&trials[1], "lr", 0.01);
  const TrialPage all = RunQuery(spec_, trials, {});
  EXPECT_THAT(Ids(all), ElementsAre(1, 3));
  EXPECT_EQ(all.total_matching, 2);
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"param", "lr:.."}})), IsEmpty());
  // Not even when asked for by hand.
  TrialQuery q;
  q.states = {v1::Trial::STATE_UNSPECIFIED};
  EXPECT_EQ(QueryTrials(spec_, trials, q).total_matching, 0);
}

TEST_F(TrialQueryTest, StateListsInAnyCaseAndRepeatedStatesAreTheUnion) {
  std::vector<v1::Trial> trials;
  int64_t id = 0;
  for (v1::Trial::State s :
       {v1::Trial::REQUESTED, v1::Trial::ACTIVE, v1::Trial::STOPPING, v1::Trial::SUCCEEDED,
        v1::Trial::INFEASIBLE, v1::Trial::FAILED, v1::Trial::STOPPED}) {
    trials.push_back(MakeTrial(++id, s));
  }
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"state", "succeeded,STOPPED"}})), ElementsAre(4, 7));
  EXPECT_THAT(Ids(RunQuery(spec_, trials, {{"state", "Active"}, {"state", "failed,active"}})),
              ElementsAre(2, 6));
  absl::StatusOr<TrialQuery> q = ParseTrialQuery(spec_, {{"state", "active,ACTIVE,failed"}});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_THAT(q->states, ElementsAre(v1::Trial::ACTIVE, v1::Trial::FAILED));
}

class RangeTest : public TrialQueryTest {
 protected:
  // id: lr, layers, batch, optimizer (momentum with sgd; schedule with layers 2).
  RangeTest() {
    Add(1, 0.001, 1, 32, "adam");
    Add(2, 0.01, 2, 64, "sgd", 0.9, "cosine", 3);
    Add(3, 0.1, 4, 128, "rmsprop");
    Add(4, 0.5, 2, 64, "sgd", 0.5, "constant");
    Add(5, 1.0, 8, 32, "adagrad");
  }

  void Add(int64_t id, double lr, int64_t layers, double batch, const std::string& optimizer,
           std::optional<double> momentum = std::nullopt,
           std::optional<std::string> schedule = std::nullopt,
           std::optional<int64_t> cycles = std::nullopt) {
    v1::Trial t = MakeTrial(id, id == 3 ? v1::Trial::ACTIVE : v1::Trial::SUCCEEDED);
    SetDouble(&t, "lr", lr);
    SetInt(&t, "layers", layers);
    SetDouble(&t, "batch", batch);
    SetString(&t, "optimizer", optimizer);
    if (momentum) SetDouble(&t, "momentum", *momentum);
    if (schedule) SetString(&t, "schedule", *schedule);
    if (cycles) SetInt(&t, "cycles", *cycles);
    trials_.push_back(std::move(t));
  }

  std::vector<int64_t> Matching(const Query& query) const {
    return Ids(RunQuery(spec_, trials_, query));
  }

  std::vector<v1::Trial> trials_;
};

TEST_F(RangeTest, NumberRangesIncludeTheirBoundsAndEitherBoundMayBeAbsent) {
  EXPECT_THAT(Matching({{"param", "lr:0.01..0.5"}}), ElementsAre(2, 3, 4));
  EXPECT_THAT(Matching({{"param", "lr:..0.01"}}), ElementsAre(1, 2));
  EXPECT_THAT(Matching({{"param", "lr:0.5.."}}), ElementsAre(4, 5));
  EXPECT_THAT(Matching({{"param", "lr:1e-2..1e-1"}}), ElementsAre(2, 3));
  EXPECT_THAT(Matching({{"param", "lr:.."}}), ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(Matching({{"param", "lr:0.2..0.3"}}), IsEmpty());
}

TEST_F(RangeTest, IntegerAndDiscreteParametersTakeRanges) {
  EXPECT_THAT(Matching({{"param", "layers:2..4"}}), ElementsAre(2, 3, 4));
  EXPECT_THAT(Matching({{"param", "layers:1.5..2.5"}}), ElementsAre(2, 4));
  EXPECT_THAT(Matching({{"param", "batch:64..128"}}), ElementsAre(2, 3, 4));
}

TEST_F(RangeTest, CategoricalParametersTakeAListOfValues) {
  EXPECT_THAT(Matching({{"param", "optimizer:adam|sgd"}}), ElementsAre(1, 2, 4));
  EXPECT_THAT(Matching({{"param", "optimizer:adagrad"}}), ElementsAre(5));
}

TEST_F(RangeTest, ATrialInWhichAConditionalParameterIsInactiveFailsItsFilter) {
  EXPECT_THAT(Matching({{"param", "momentum:.."}}), ElementsAre(2, 4));
  EXPECT_THAT(Matching({{"param", "momentum:0.6.."}}), ElementsAre(2));
  // Two levels down: cycles exists only with layers 2 and schedule cosine.
  EXPECT_THAT(Matching({{"param", "schedule:constant|cosine"}}), ElementsAre(2, 4));
  EXPECT_THAT(Matching({{"param", "cycles:1..4"}}), ElementsAre(2));
}

TEST_F(RangeTest, EveryFilterMustHold) {
  EXPECT_THAT(Matching({{"param", "lr:0.01.."}, {"param", "layers:..2"}}), ElementsAre(2, 4));
  EXPECT_THAT(Matching({{"param", "lr:0.01.."}, {"param", "lr:..0.1"}}), ElementsAre(2, 3));
  EXPECT_THAT(Matching({{"param", "lr:0.01.."}, {"state", "succeeded"}}), ElementsAre(2, 4, 5));
  EXPECT_THAT(
      Matching(
          {{"param", "batch:..64"}, {"param", "optimizer:sgd|adagrad"}, {"order_by", "-param:lr"}}),
      ElementsAre(5, 4, 2));
}

TEST_F(TrialQueryTest, ParameterNamesMayHoldColons) {
  v1::StudySpec spec;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(metrics { name: "loss" }
           parameters {
             name: "net:width"
             integer_spec { min: 1 max: 512 }
           }
           parameters {
             name: "act"
             categorical_spec { values: "relu" values: "a:b" }
           })pb",
      &spec));
  std::vector<v1::Trial> trials = {MakeTrial(1, v1::Trial::SUCCEEDED),
                                   MakeTrial(2, v1::Trial::SUCCEEDED)};
  SetInt(&trials[0], "net:width", 64);
  SetString(&trials[0], "act", "a:b");
  SetInt(&trials[1], "net:width", 256);
  SetString(&trials[1], "act", "relu");
  EXPECT_THAT(Ids(RunQuery(spec, trials, {{"param", "net:width:100.."}})), ElementsAre(2));
  EXPECT_THAT(Ids(RunQuery(spec, trials, {{"param", "act:a:b"}})), ElementsAre(1));
  EXPECT_THAT(Ids(RunQuery(spec, trials, {{"order_by", "-param:net:width"}})), ElementsAre(2, 1));
}

// ---- Paging --------------------------------------------------------------------------------

class PagingTest : public TrialQueryTest {
 protected:
  // 400 trials: every third is FAILED, the others SUCCEEDED with lr cycling over 37 values.
  PagingTest() {
    for (int64_t id = 1; id <= 400; ++id) {
      trials_.push_back(MakeTrial(id, id % 3 == 0 ? v1::Trial::FAILED : v1::Trial::SUCCEEDED));
      SetDouble(&trials_.back(), "lr", 0.001 * static_cast<double>(id * 7 % 37 + 1));
    }
  }

  // Follows next_page_token from the first page to the last; the pages' trials in order.
  std::vector<int64_t> WalkAllPages(const Query& query, int64_t want_total, int* pages) {
    std::vector<int64_t> ids;
    std::string token;
    *pages = 0;
    do {
      Query with_token = query;
      with_token.emplace_back("page_token", token);
      const TrialPage page = RunQuery(spec_, trials_, with_token);
      EXPECT_EQ(page.total_matching, want_total);
      for (int64_t id : Ids(page)) ids.push_back(id);
      token = page.next_page_token;
      ++*pages;
    } while (!token.empty() && *pages < 1000);
    return ids;
  }

  std::vector<v1::Trial> trials_;
};

TEST_F(PagingTest, PageTokensWalkEveryMatchingTrialOnceInTheSortedOrder) {
  const Query query = {{"state", "succeeded"}, {"order_by", "-param:lr"}, {"page_size", "50"}};
  absl::StatusOr<TrialQuery> whole = ParseTrialQuery(
      spec_, {{"state", "succeeded"}, {"order_by", "-param:lr"}, {"page_size", "1000"}});
  ASSERT_TRUE(whole.ok()) << whole.status();
  const TrialPage all = QueryTrials(spec_, trials_, *whole);
  ASSERT_EQ(all.total_matching, 267);  // 400 - 133 FAILED
  EXPECT_TRUE(all.next_page_token.empty());

  int pages = 0;
  const std::vector<int64_t> walked = WalkAllPages(query, 267, &pages);
  EXPECT_EQ(pages, 6);  // 5 full pages of 50 and one of 17
  EXPECT_THAT(walked, ElementsAreArray(Ids(all)));
  EXPECT_EQ(std::set<int64_t>(walked.begin(), walked.end()).size(), walked.size());
  for (int64_t id : walked) EXPECT_NE(id % 3, 0) << id;
}

TEST_F(PagingTest, APageThatEndsExactlyAtTheLastTrialHasNoNextToken) {
  const TrialPage page = RunQuery(spec_, trials_, {{"page_size", "100"}, {"page_token", "o:300"}});
  EXPECT_EQ(page.trials.size(), 100u);
  EXPECT_EQ(page.trials.front()->id(), 301);
  EXPECT_TRUE(page.next_page_token.empty());
  EXPECT_EQ(
      RunQuery(spec_, trials_, {{"page_size", "100"}, {"page_token", "o:200"}}).next_page_token,
      "o:300:400");
}

TEST_F(PagingTest, AnOffsetPastTheEndIsAnEmptyLastPage) {
  const TrialPage page = RunQuery(spec_, trials_, {{"page_token", "o:5000"}});
  EXPECT_THAT(page.trials, IsEmpty());
  EXPECT_EQ(page.total_matching, 400);
  EXPECT_TRUE(page.next_page_token.empty());
}

TEST_F(PagingTest, TheDefaultPageIsFiftyTrials) {
  const TrialPage page = RunQuery(spec_, trials_, {});
  EXPECT_EQ(page.trials.size(), 50u);
  EXPECT_EQ(page.next_page_token, "o:50:400");
}

// A running study gets trials between two page loads: later pages keep to the trials of the
// first page's time, so none is listed twice and none shifts into a page already read.
TEST_F(PagingTest, TrialsCreatedAfterTheFirstPageDoNotShiftLaterPages) {
  const Query query = {{"order_by", "-param:lr"}, {"page_size", "50"}};
  const TrialPage first = RunQuery(spec_, trials_, query);
  ASSERT_EQ(first.next_page_token, "o:50:400");
  Query next = query;
  next.emplace_back("page_token", first.next_page_token);
  const std::vector<int64_t> second_before = Ids(RunQuery(spec_, trials_, next));
  // Two new trials with the largest lr: by offset alone they would push two rows of the first
  // page onto the second.
  for (int64_t id : {401, 402}) {
    trials_.push_back(MakeTrial(id, v1::Trial::SUCCEEDED));
    SetDouble(&trials_.back(), "lr", 1.0);
  }
  const TrialPage second = RunQuery(spec_, trials_, next);
  EXPECT_THAT(Ids(second), ElementsAreArray(second_before));
  EXPECT_EQ(second.total_matching, 400);
  EXPECT_EQ(second.next_page_token, "o:100:400");
  // A fresh first page sees them.
  const TrialPage fresh = RunQuery(spec_, trials_, query);
  EXPECT_EQ(fresh.total_matching, 402);
  EXPECT_THAT(Ids(fresh), ::testing::IsSupersetOf({401, 402}));
  EXPECT_EQ(fresh.next_page_token, "o:50:402");
}

// ---- Parsing -------------------------------------------------------------------------------

TEST_F(TrialQueryTest, ParsesEveryFieldAndIgnoresUnknownKeys) {
  absl::StatusOr<TrialQuery> q = ParseTrialQuery(spec_, {{"order_by", "-param:lr"},
                                                         {"state", "succeeded,stopped"},
                                                         {"param", "lr:0.001..0.01"},
                                                         {"param", "layers:..4"},
                                                         {"param", "optimizer:adam|sgd"},
                                                         {"page_size", "20"},
                                                         {"page_token", "o:150:900"},
                                                         {"metric", "ignored"},
                                                         {"columns", "lr,loss"}});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->order_by, "param:lr");
  EXPECT_TRUE(q->descending);
  EXPECT_THAT(q->states, ElementsAre(v1::Trial::SUCCEEDED, v1::Trial::STOPPED));
  ASSERT_EQ(q->ranges.size(), 3u);
  EXPECT_EQ(q->ranges[0].param, "lr");
  EXPECT_EQ(q->ranges[0].min, 0.001);
  EXPECT_EQ(q->ranges[0].max, 0.01);
  EXPECT_THAT(q->ranges[0].categories, IsEmpty());
  EXPECT_EQ(q->ranges[1].min, std::nullopt);
  EXPECT_EQ(q->ranges[1].max, 4);
  EXPECT_EQ(q->ranges[2].param, "optimizer");
  EXPECT_THAT(q->ranges[2].categories, ElementsAre("adam", "sgd"));
  EXPECT_EQ(q->page_size, 20);
  EXPECT_EQ(q->offset, 150);
  EXPECT_EQ(q->max_id, 900);
}

TEST_F(TrialQueryTest, AnEmptyQueryIsTheFirstPageByIdOfEveryState) {
  absl::StatusOr<TrialQuery> q = ParseTrialQuery(spec_, {{"page_token", ""}});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->order_by, "id");
  EXPECT_FALSE(q->descending);
  EXPECT_THAT(q->states, IsEmpty());
  EXPECT_THAT(q->ranges, IsEmpty());
  EXPECT_EQ(q->page_size, 50);
  EXPECT_EQ(q->offset, 0);
}

struct BadQuery {
  std::string name;  // the test's name
  Query query;
  std::string message;
};

void PrintTo(const BadQuery& c, std::ostream* os) { *os << c.name; }

class BadQueryTest : public TrialQueryTest, public ::testing::WithParamInterface<BadQuery> {};

TEST_P(BadQueryTest, IsInvalidArgumentNamingTheFieldAndTheFault) {
  EXPECT_THAT(ParseTrialQuery(spec_, GetParam().query).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, GetParam().message));
}

const std::string kWantStates =
    " (want requested, active, stopping, succeeded, infeasible, failed or stopped)";
const std::string kWantSortKeys =
    " (want id, state, client, start_time, end_time, memory_requested, memory_peak, "
    "cpu_requested, cpu_used, metric:NAME or param:NAME)";

INSTANTIATE_TEST_SUITE_P(
    EveryRule, BadQueryTest,
    ::testing::Values(
        BadQuery{"UnknownSortKey",
                 {{"order_by", "name"}},
                 "order_by: unknown sort key \"name\"" + kWantSortKeys},
        BadQuery{
            "EmptySortKey", {{"order_by", ""}}, "order_by: unknown sort key \"\"" + kWantSortKeys},
        BadQuery{"SortKeyInAnotherCase",
                 {{"order_by", "-ID"}},
                 "order_by: unknown sort key \"ID\"" + kWantSortKeys},
        BadQuery{"UnknownMetric",
                 {{"order_by", "-metric:acc"}},
                 "order_by: \"metric:acc\" is not a metric of the study (want one of \"loss\")"},
        BadQuery{"UnknownSortParameter",
                 {{"order_by", "param:wd"}},
                 StrCat("order_by: \"param:wd\" is not a parameter of the study (want one of ",
                        kAllParameters, ")")},
        BadQuery{"SortKeyTwice",
                 {{"order_by", "id"}, {"order_by", "-id"}},
                 "order_by: given more than once"},
        BadQuery{"UnknownState",
                 {{"state", "succeeded,done"}},
                 "state: unknown trial state \"done\"" + kWantStates},
        BadQuery{"TombstoneState",
                 {{"state", "state_unspecified"}},
                 "state: unknown trial state \"state_unspecified\"" + kWantStates},
        BadQuery{"EmptyStateInTheList",
                 {{"state", "active,"}},
                 "state: unknown trial state \"\"" + kWantStates},
        BadQuery{"UnknownParameter",
                 {{"param", "wd:0..1"}},
                 StrCat("param: \"wd\" is not a parameter of the study (want one of ",
                        kAllParameters, ")")},
        BadQuery{"ParameterWithoutAColon",
                 {{"param", "lr"}},
                 "param: \"lr\" is not NAME:MIN..MAX or NAME:VALUE|VALUE..."},
        BadQuery{"RangeOnACategoricalParameter",
                 {{"param", "optimizer:0..1"}},
                 "param: \"optimizer\" is categorical: list its values (optimizer:A|B), not a "
                 "range"},
        BadQuery{"UnknownCategory",
                 {{"param", "optimizer:adam|adamw"}},
                 "param: \"optimizer\" has no value \"adamw\" (want one of \"sgd\", \"adam\", "
                 "\"rmsprop\", \"adagrad\")"},
        BadQuery{"NoCategory",
                 {{"param", "optimizer:"}},
                 "param: \"optimizer\" has no value \"\" (want one of \"sgd\", \"adam\", "
                 "\"rmsprop\", \"adagrad\")"},
        BadQuery{"ValuesOfANumberParameter",
                 {{"param", "lr:0.1|0.2"}},
                 "param: \"lr\" is a number: give a range (lr:MIN..MAX), not a list of values"},
        BadQuery{"ValuesOfAnIntegerParameter",
                 {{"param", "layers:2"}},
                 "param: \"layers\" is a number: give a range (layers:MIN..MAX), not a list of "
                 "values"},
        BadQuery{"MinAboveMax", {{"param", "lr:0.5..0.1"}}, "param: \"lr\" has min 0.5 > max 0.1"},
        BadQuery{"MinNotANumber",
                 {{"param", "lr:abc..1"}},
                 "param: \"lr\" min \"abc\" is not a finite number"},
        BadQuery{"MaxInfinite",
                 {{"param", "lr:0..inf"}},
                 "param: \"lr\" max \"inf\" is not a finite number"},
        BadQuery{"MaxNaN",
                 {{"param", "momentum:0..nan"}},
                 "param: \"momentum\" max \"nan\" is not a finite number"},
        BadQuery{"ThreeBounds",
                 {{"param", "lr:0..1..2"}},
                 "param: \"lr\" max \"1..2\" is not a finite number"},
        BadQuery{"PageSizeZero", {{"page_size", "0"}}, "page_size: 0 must be in [1, 1000]"},
        BadQuery{
            "PageSizeTooLarge", {{"page_size", "1001"}}, "page_size: 1001 must be in [1, 1000]"},
        BadQuery{
            "PageSizeNotANumber", {{"page_size", "ten"}}, "page_size: \"ten\" is not an integer"},
        BadQuery{"PageSizeTwice",
                 {{"page_size", "10"}, {"page_size", "10"}},
                 "page_size: given more than once"},
        BadQuery{"PageTokenWithoutPrefix",
                 {{"page_token", "150"}},
                 "page_token: malformed token \"150\""},
        BadQuery{
            "PageTokenWithoutOffset", {{"page_token", "o:"}}, "page_token: malformed token \"o:\""},
        BadQuery{
            "PageTokenNegative", {{"page_token", "o:-1"}}, "page_token: malformed token \"o:-1\""},
        BadQuery{
            "PageTokenSigned", {{"page_token", "o:+5"}}, "page_token: malformed token \"o:+5\""},
        BadQuery{"PageTokenTrailingJunk",
                 {{"page_token", "o:5x"}},
                 "page_token: malformed token \"o:5x\""},
        BadQuery{"PageTokenOverflowing",
                 {{"page_token", "o:99999999999999999999"}},
                 "page_token: malformed token \"o:99999999999999999999\""},
        BadQuery{"PageTokenMaxIdEmpty", {{"page_token", "o:50:"}},
                 "page_token: malformed token \"o:50:\""},
        BadQuery{"PageTokenMaxIdZero", {{"page_token", "o:50:0"}},
                 "page_token: malformed token \"o:50:0\""},
        BadQuery{"PageTokenMaxIdSigned", {{"page_token", "o:50:-3"}},
                 "page_token: malformed token \"o:50:-3\""},
        BadQuery{"PageTokenFourParts", {{"page_token", "o:50:400:1"}},
                 "page_token: malformed token \"o:50:400:1\""},
        BadQuery{"PageTokenTwice",
                 {{"page_token", "o:5"}, {"page_token", "o:5"}},
                 "page_token: given more than once"}),
    [](const ::testing::TestParamInfo<BadQuery>& info) { return info.param.name; });

TEST_F(TrialQueryTest, AStudyWithManyParametersListsTwentyNamesInAMessage) {
  v1::StudySpec spec;
  for (int i = 0; i < 25; ++i) {
    v1::ParameterSpec* p = spec.add_parameters();
    p->set_name(absl::StrCat("p", i));
    p->mutable_double_spec()->set_max(1);
  }
  absl::StatusOr<TrialQuery> q = ParseTrialQuery(spec, {{"order_by", "param:q"}});
  EXPECT_THAT(q.status(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   ::testing::EndsWith("\"p18\", \"p19\" and 5 more)")));
  EXPECT_THAT(ParseTrialQuery(spec, {{"order_by", "metric:loss"}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "order_by: \"metric:loss\" is not a metric of the study (it has none)"));
}

}  // namespace
}  // namespace evoscale::service
