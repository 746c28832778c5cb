// Streaming input for the trainer: the Criteo text format, a synthetic click log with a known
// logistic ground truth, and a batcher that parses on a background thread and routes each
// batch's feature ids to their shards.
//
// Criteo text: one example per line, 40 tab-separated fields: label (0/1), 13 integer features
// (may be empty or negative), 26 categorical features as hex strings (may be empty). Dense
// features become log1p(max(x, 0)); categorical field f with value v becomes MakeFid(f, v), an
// empty field the value 0 (one "missing" id per field).
#ifndef EVOSCALE_TRAINER_CRITEO_READER_H_
#define EVOSCALE_TRAINER_CRITEO_READER_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace evoscale::trainer {

inline constexpr int kNumDense = 13;
inline constexpr int kNumCategorical = 26;

// Where a stream stands: the next example is line `row` (0-based) of epoch `epoch`, starting at
// byte `offset` of the file (0 for generated data).
struct ReaderPosition {
  int64_t epoch = 0;
  int64_t row = 0;
  int64_t offset = 0;
};

// One field of the layout, as ParseCriteoLine reads it (and evoscale-serve's requests): an
// integer feature's value (log1p(max(v, 0))), and categorical field f's hex text (empty: the
// field's missing value 0; at most 16 hex digits) as its id MakeFid(f, value). False, with the
// reason in `why` when given, for text that is not hex.
inline float DenseFeature(int64_t v) { return std::log1p(float(v > 0 ? v : 0)); }
bool ParseCategoricalFeature(absl::string_view text, int field, uint64_t* fid,
                             std::string* why = nullptr);

// Parses one line (no trailing newline; a trailing '\r' is ignored). On success fills label,
// dense[kNumDense], fids[kNumCategorical]; otherwise returns false and, if `why` is given, the
// reason.
bool ParseCriteoLine(absl::string_view line, float* label, float* dense, uint64_t* fids,
                     std::string* why = nullptr);

// A sequence of examples over one or more epochs. Not thread-safe.
class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  // The next example and its row index within its epoch; false after the last epoch. Malformed
  // lines are skipped and counted. Errors: I/O failures.
  virtual absl::StatusOr<bool> Next(float* label, float* dense, uint64_t* fids, int64_t* row) = 0;
  // The position of the next example (a resume point).
  virtual ReaderPosition position() const = 0;
  // A source that knows the next example's row index without decoding it returns it (-1 at the
  // end; moving to the next epoch if need be), so a reader skips the rows it does not keep
  // (another rank's) with SkipNext instead of decoding them. -2: not known (decode to see).
  virtual int64_t NextRow() { return -2; }
  virtual void SkipNext() {}
  virtual int64_t lines() const { return 0; }
  virtual int64_t malformed() const { return 0; }
  // The first malformed line's number (1-based within its epoch) and reason, if any.
  virtual std::string first_malformed() const { return ""; }
  virtual std::string name() const = 0;
};

// Reads a Criteo text file `epochs` times, starting at `start`. NOT_FOUND if the file is
// missing, INVALID_ARGUMENT if `start` lies outside it.
absl::StatusOr<std::unique_ptr<ExampleSource>> OpenCriteoFile(const std::string& path, int epochs,
                                                              ReaderPosition start = {});

// A stream of the Criteo text format, read once as it comes (online training): "-" is stdin,
// ending at its EOF; a file is followed past its end (tail -f) from `start.offset` until a stop
// is requested (stop_request.h). A partial last line waits for its newline.
absl::StatusOr<std::unique_ptr<ExampleSource>> OpenCriteoStream(const std::string& path,
                                                                ReaderPosition start = {});

// A generated click log in the spirit of ../shared/bench/ctr/gen_synth.py: Zipf(1.15) ids over
// fixed per-field vocabularies, per-id logistic weights, Poisson dense features and one pairwise
// interaction, all drawn from a fixed ground truth; row r of a given seed is a pure function of
// (seed, r), so any position can be resumed. `rows` per epoch.
std::unique_ptr<ExampleSource> MakeSyntheticSource(int64_t rows, uint64_t seed, int epochs,
                                                   ReaderPosition start = {});

// Which rows of a source a reader keeps: with holdout_every = k > 0, row r is held out when
// r % k == k - 1; `holdout` selects the held-out rows instead of the rest.
// With ranks > 1 (a job of several processes), each rank keeps every ranks-th of those rows
// (the training rows, or the held-out ones), so the ranks' slices differ by at most one row.
struct RowFilter {
  int64_t holdout_every = 0;
  bool holdout = false;
  int ranks = 1;
  int rank = 0;
  bool Keep(int64_t row) const {
    const bool held = holdout_every > 0 && row % holdout_every == holdout_every - 1;
    if (held != holdout) return false;
    if (ranks <= 1) return true;
    // The row's index among the rows of its kind: held-out rows are every k-th.
    const int64_t index = holdout_every <= 0 ? row
                          : held             ? row / holdout_every
                                             : row - row / holdout_every;
    return index % ranks == rank;
  }
};

struct ExampleBatch {
  int size = 0;
  std::vector<float> labels;   // (size)
  std::vector<float> dense;    // (size, kNumDense)
  std::vector<uint64_t> fids;  // (size, kNumCategorical)
  // Per shard, the positions (i * kNumCategorical + f) of the ids that shard owns.
  std::vector<std::vector<uint32_t>> shard_positions;
  // With BatchReaderOptions::dedupe: per shard, its distinct ids in order of first position,
  // and for each of shard_positions[s], the index of its id in shard_keys[s]. (A job of several
  // processes sends each distinct id of a batch to its owner once.)
  std::vector<std::vector<uint64_t>> shard_keys;
  std::vector<std::vector<uint32_t>> shard_slots;
  ReaderPosition end;  // resume point after this batch
};

struct BatchReaderOptions {
  int batch_size = 1024;
  int num_shards = 1;
  RowFilter filter;
  int queue_depth = 3;
  // More malformed lines than this share of the lines read is an error (checked once 1,000
  // lines have been read, and at the end).
  double max_malformed_fraction = 0.01;
  // Fill ExampleBatch::shard_keys and shard_slots (on the background thread).
  bool dedupe = false;
};

// Fills batches from a source on a background thread, a few batches ahead of the consumer.
// Next/Recycle are for one consumer thread.
class BatchReader {
 public:
  BatchReader(std::unique_ptr<ExampleSource> source, BatchReaderOptions options);
  ~BatchReader();  // stops and joins the background thread
  BatchReader(const BatchReader&) = delete;
  BatchReader& operator=(const BatchReader&) = delete;

  // The next batch (never empty); nullptr at the end of the data. Blocks while the background
  // thread catches up. Errors: the source's, or DATA_LOSS for too many malformed lines.
  absl::StatusOr<std::unique_ptr<ExampleBatch>> Next();
  // Returns a batch's buffers for reuse.
  void Recycle(std::unique_ptr<ExampleBatch> batch);

  int64_t lines() const;
  int64_t malformed() const;
  // Whether Next would answer at once (a batch is ready, or the data is over), waiting up to
  // `seconds` for it.
  bool WaitReady(double seconds) const;

 private:
  void Run();
  absl::Status Fill(ExampleBatch* batch, bool* end);
  // shard_keys and shard_slots of a batch whose shard_positions are filled.
  void Dedupe(ExampleBatch* batch);

  // Constant after construction.
  const BatchReaderOptions options_;

  std::unique_ptr<ExampleSource> source_;  // used only by the background thread
  // Dedupe's index, used only by the background thread: open addressing over ids, a slot
  // current while its stamp is the shard's (so each shard starts empty in O(1)).
  std::vector<uint64_t> dedupe_keys_;
  std::vector<uint32_t> dedupe_slots_, dedupe_stamps_;
  uint32_t dedupe_stamp_ = 0;
  mutable absl::Mutex mu_;
  std::deque<std::unique_ptr<ExampleBatch>> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<ExampleBatch>> free_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t lines_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t malformed_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_CRITEO_READER_H_
