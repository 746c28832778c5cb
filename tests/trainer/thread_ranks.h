// The ranks of one job as threads of the test's process, for tests of what runs on every rank
// (the exchange of rows, the job's evaluation and summary) without mpirun: a transport of
// trainer::Collectives over shared host memory, with MPI's contract and byte counts.
//
// Every rank must call the same collectives in the same order, as in a real job: a rank that
// leaves early (a failed ASSERT) leaves the others waiting, so rank bodies use EXPECT.
#ifndef EVOSCALE_TESTS_TRAINER_THREAD_RANKS_H_
#define EVOSCALE_TESTS_TRAINER_THREAD_RANKS_H_

#include <barrier>
#include <functional>
#include <memory>
#include <vector>

#include "trainer/collectives.h"

namespace evoscale::trainer::testing {

class ThreadRanks {
 public:
  explicit ThreadRanks(int size);
  ~ThreadRanks();

  // Runs body(rank r's collectives) on `size` threads, one per rank; returns when all have.
  void Run(const std::function<void(Collectives&)>& body);

 private:
  class Rank;
  // What a rank shows its peers during one collective.
  struct Post {
    const void* data = nullptr;
    const void* extra = nullptr;
  };

  const int size_;
  std::barrier<> meet_;
  std::vector<Post> posts_;  // per rank; written before, read after the first barrier
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace evoscale::trainer::testing

#endif  // EVOSCALE_TESTS_TRAINER_THREAD_RANKS_H_
