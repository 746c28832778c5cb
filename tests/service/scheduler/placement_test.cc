// Place (service/scheduler/placement.h): what starts and what is preempted, case by case.
#include "service/scheduler/placement.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace evoscale::service {
namespace {

using ::testing::ElementsAreArray;

constexpr int64_t kGi = int64_t{1} << 30;
const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

WaitingTrial Waiting(int id, int priority, int64_t memory_gi, double cores = 1, int gpus = 0,
                     int study_age_rank = 0, int64_t trial_id = 0) {
  return {.id = id,
          .priority = priority,
          .study_created = kT0 + absl::Seconds(study_age_rank),
          .study = "studies/" + std::to_string(study_age_rank + 1),
          .trial_id = trial_id != 0 ? trial_id : id,
          .request = {cores, memory_gi * kGi, gpus}};
}

PlacedTrial Running(int id, int priority, int64_t memory_gi, int started_s, double cores = 1,
                    bool preempting = false) {
  return {.id = id,
          .priority = priority,
          .started = kT0 + absl::Seconds(started_s),
          .request = {cores, memory_gi * kGi, 0},
          .preempting = preempting};
}

struct Case {
  std::string name;
  std::vector<WaitingTrial> waiting;
  std::vector<PlacedTrial> running;
  Capacity capacity;
  std::vector<int> start;
  std::vector<int> preempt;
  std::vector<int> still_waiting;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// 8 cores, 8 GiB, no GPU, 4 trials at once unless a case says otherwise.
constexpr Capacity kMachine{.cpu_cores = 8, .memory_bytes = 8 * kGi, .free_gpus = 0,
                            .max_running = 4};

std::vector<Case> Cases() {
  Capacity two_gpus = kMachine;
  two_gpus.free_gpus = 2;
  Capacity one_at_a_time = kMachine;
  one_at_a_time.max_running = 1;
  return {
      {"NothingWaitingStartsNothing", {}, {Running(0, 0, 2, 0)}, kMachine, {}, {}, {}},
      {"BestFitTakesTheLargestRequestThatFitsFirst",
       {Waiting(0, 0, 2), Waiting(1, 0, 5), Waiting(2, 0, 3)},
       {},
       kMachine,
       {1, 2},
       {},
       {0}},
      {"ATieInMemoryGoesToTheOldestStudy",
       {Waiting(0, 0, 4, 1, 0, /*study_age_rank=*/1), Waiting(1, 0, 4, 1, 0, 0),
        Waiting(2, 0, 4, 1, 0, 2)},
       {Running(9, 0, 1, 0)},
       kMachine,
       {1},
       {},
       {0, 2}},
      {"CoresBindLikeMemory",
       {Waiting(0, 0, 1, /*cores=*/6), Waiting(1, 0, 1, 3)},
       {Running(9, 0, 1, 0, /*cores=*/2)},
       kMachine,
       {0},
       {},
       {1}},
      {"MaxRunningCountsTrialsWhateverTheyHold",
       {Waiting(0, 0, 1), Waiting(1, 0, 1)},
       {Running(9, 0, 1, 0)},
       one_at_a_time,
       {},
       {},
       {0, 1}},
      {"ATrialLargerThanTheMachineRunsAloneRatherThanNever",
       {Waiting(0, 0, 20)},
       {},
       kMachine,
       {0},
       {},
       {}},
      {"...ButNotBesideAnother", {Waiting(0, 0, 20)}, {Running(9, 0, 1, 0)}, kMachine, {}, {}, {0}},
      {"GpusMustBeFree",
       {Waiting(0, 0, 1, 1, /*gpus=*/2), Waiting(1, 0, 1, 1, 1), Waiting(2, 0, 1, 1, 1)},
       {},
       two_gpus,
       {0},
       {},
       {1, 2}},
      {"HigherPriorityFirstAndLowerOnesDoNotBackfill",
       {Waiting(0, 0, 1), Waiting(1, 5, 7)},
       {Running(9, 5, 2, 0)},
       kMachine,
       {},
       {},
       {1, 0}},
      {"LowerPriorityStartsOnceTheHigherHaveStarted",
       {Waiting(0, 0, 1), Waiting(1, 5, 5)},
       {Running(9, 5, 2, 0)},
       kMachine,
       {1, 0},
       {},
       {}},
      {"PreemptsTheLowestPriorityThenTheMostRecentlyStarted",
       {Waiting(0, 5, 4)},
       {Running(10, 1, 2, 0), Running(11, 0, 2, 10), Running(12, 0, 2, 20), Running(13, 5, 2, 5)},
       kMachine,
       {},
       {12, 11},
       {0}},
      {"PreemptsNothingWhenStoppingAllLowerOnesWouldNotFreeEnough",
       {Waiting(0, 5, 7)},
       {Running(10, 0, 2, 0), Running(11, 5, 5, 10)},
       kMachine,
       {},
       {},
       {0}},
      {"TrialsAlreadyBeingPreemptedCountAsGone",
       {Waiting(0, 5, 4)},
       {Running(10, 0, 2, 0, 1, /*preempting=*/true), Running(11, 0, 3, 10), Running(12, 0, 3, 20)},
       kMachine,
       {},
       {12},
       {0}},
      {"EqualPriorityIsNeverPreempted",
       {Waiting(0, 3, 6)},
       {Running(10, 3, 4, 0)},
       kMachine,
       {},
       {},
       {0}},
  };
}

class PlaceTest : public ::testing::TestWithParam<Case> {};

TEST_P(PlaceTest, DecidesAsTheRuleSays) {
  const Case& c = GetParam();
  const Placement p = Place(c.waiting, c.running, c.capacity);
  EXPECT_THAT(p.start, ElementsAreArray(c.start));
  EXPECT_THAT(p.preempt, ElementsAreArray(c.preempt));
  EXPECT_THAT(p.waiting, ElementsAreArray(c.still_waiting));
}

INSTANTIATE_TEST_SUITE_P(Cases, PlaceTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.name;
                           std::erase(name, '.');
                           return name;
                         });

}  // namespace
}  // namespace evoscale::service
