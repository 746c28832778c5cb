#include "trainer/criteo_reader.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <utility>

#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "trainer/feature_id.h"
#include "trainer/stop_request.h"

namespace evoscale::trainer {
namespace {

enum class StreamMode { kNone, kUntilEof, kFollow };

constexpr size_t kReadChunk = size_t{1} << 20;

bool Fail(std::string* why, std::string message) {
  if (why != nullptr) *why = std::move(message);
  return false;
}

class CriteoFileSource : public ExampleSource {
 public:
  CriteoFileSource(std::string path, FILE* file, int epochs, ReaderPosition start,
                   StreamMode stream = StreamMode::kNone)
      : path_(std::move(path)), file_(file), epochs_(epochs), pos_(start), stream_(stream) {}
  ~CriteoFileSource() override { std::fclose(file_); }

  absl::StatusOr<bool> Next(float* label, float* dense, uint64_t* fids, int64_t* row) override {
    while (true) {
      absl::string_view line;
      absl::StatusOr<bool> got = NextLine(&line);
      if (!got.ok() || !*got) return got;
      const int64_t this_row = pos_.row;
      pos_.row++;
      pos_.offset += int64_t(line_bytes_);
      ++lines_;
      std::string why;
      if (!ParseCriteoLine(line, label, dense, fids, &why)) {
        if (malformed_++ == 0) {
          first_malformed_ = absl::StrCat(path_, ":", this_row + 1, ": ", why);
        }
        continue;
      }
      *row = this_row;
      return true;
    }
  }

  ReaderPosition position() const override { return pos_; }
  int64_t lines() const override { return lines_; }
  int64_t malformed() const override { return malformed_; }
  std::string first_malformed() const override { return first_malformed_; }
  std::string name() const override { return path_; }

 private:
  // The next line of the current epoch, moving to the next epoch at the end of the file.
  absl::StatusOr<bool> NextLine(absl::string_view* line) {
    while (true) {
      const char* begin = buffer_.data() + head_;
      const char* nl = static_cast<const char*>(std::memchr(begin, '\n', tail_ - head_));
      if (nl != nullptr) {
        *line = absl::string_view(begin, size_t(nl - begin));
        line_bytes_ = size_t(nl - begin) + 1;
        head_ += line_bytes_;
        return true;
      }
      if (eof_) {
        if (head_ < tail_) {  // a last line without a newline
          *line = absl::string_view(begin, tail_ - head_);
          line_bytes_ = tail_ - head_;
          head_ = tail_;
          return true;
        }
        if (pos_.epoch + 1 >= epochs_) return false;
        ++pos_.epoch;
        pos_.row = 0;
        pos_.offset = 0;
        if (std::fseek(file_, 0, SEEK_SET) != 0) {
          return absl::DataLossError(absl::StrCat(path_, ": rewind: ", std::strerror(errno)));
        }
        head_ = tail_ = 0;
        eof_ = false;
        continue;
      }
      // Keep the partial line, refill behind it.
      std::memmove(buffer_.data(), buffer_.data() + head_, tail_ - head_);
      tail_ -= head_;
      head_ = 0;
      if (buffer_.size() < tail_ + kReadChunk) buffer_.resize(tail_ + kReadChunk);
      if (stream_ != StreamMode::kNone) {
        absl::StatusOr<bool> more = ReadStream();
        if (!more.ok() || !*more) return more;
        continue;
      }
      const size_t got = std::fread(buffer_.data() + tail_, 1, kReadChunk, file_);
      if (got < kReadChunk) {
        if (std::ferror(file_)) {
          return absl::DataLossError(absl::StrCat(path_, ": read: ", std::strerror(errno)));
        }
        eof_ = true;
      }
      tail_ += got;
    }
  }

  // A stream's next bytes, as they come (never waiting for a whole chunk): false at its end
  // (stdin's EOF; a followed file only once a stop is requested, a partial last line dropped).
  absl::StatusOr<bool> ReadStream() {
    const int fd = fileno(file_);
    while (true) {
      pollfd readable{fd, POLLIN, 0};
      const int ready = poll(&readable, 1, 50);
      if (StopRequested()) return false;
      if (ready <= 0) continue;
      const ssize_t got = read(fd, buffer_.data() + tail_, kReadChunk);
      if (got > 0) {
        tail_ += size_t(got);
        return true;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return absl::DataLossError(absl::StrCat(path_, ": read: ", std::strerror(errno)));
      if (stream_ == StreamMode::kUntilEof) {  // stdin's end: what is left is the last line
        eof_ = true;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a file: wait for more
    }
  }

  const std::string path_;
  FILE* const file_;
  const int epochs_;
  ReaderPosition pos_;
  const StreamMode stream_;
  std::vector<char> buffer_;
  size_t head_ = 0, tail_ = 0, line_bytes_ = 0;
  bool eof_ = false;
  int64_t lines_ = 0, malformed_ = 0;
  std::string first_malformed_;
};

}  // namespace

bool ParseCategoricalFeature(absl::string_view text, int field, uint64_t* fid,
                             std::string* why) {
  uint64_t v = 0;
  if (!text.empty()) {
    if (text.size() > 16) {
      return Fail(why, absl::StrCat("categorical ", field + 1, " longer than 16 hex digits"));
    }
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
    if (ec != std::errc() || p != text.data() + text.size()) {
      return Fail(why, absl::StrCat("categorical ", field + 1, " is not hex"));
    }
  }
  *fid = MakeFid(uint32_t(field), v);
  return true;
}

bool ParseCriteoLine(absl::string_view line, float* label, float* dense, uint64_t* fids,
                     std::string* why) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return Fail(why, "empty line");
  size_t start = 0;
  for (int field = 0; field < 1 + kNumDense + kNumCategorical; ++field) {
    if (start > line.size()) {
      return Fail(why, absl::StrCat("expected 40 tab-separated fields, found ", field));
    }
    size_t end = line.find('\t', start);
    const bool last = field == kNumDense + kNumCategorical;
    if (end == absl::string_view::npos) {
      if (!last)
        return Fail(why, absl::StrCat("expected 40 tab-separated fields, found ", field + 1));
      end = line.size();
    } else if (last) {
      return Fail(why, "more than 40 tab-separated fields");
    }
    const char* b = line.data() + start;
    const char* e = line.data() + end;
    if (field == 0) {
      if (e - b != 1 || (*b != '0' && *b != '1')) return Fail(why, "label is not 0 or 1");
      *label = *b == '1' ? 1.0f : 0.0f;
    } else if (field <= kNumDense) {
      int64_t v = 0;
      if (b != e) {
        auto [p, ec] = std::from_chars(b, e, v);
        if (ec != std::errc() || p != e) {
          return Fail(why, absl::StrCat("integer feature ", field, " is not an integer"));
        }
      }
      dense[field - 1] = DenseFeature(v);
    } else if (!ParseCategoricalFeature(absl::string_view(b, size_t(e - b)),
                                        field - 1 - kNumDense, &fids[field - 1 - kNumDense],
                                        why)) {
      return false;
    }
    start = end + 1;
  }
  return true;
}

namespace {

// `path` opened to read: NOT_FOUND when it is missing, PERMISSION_DENIED otherwise.
absl::StatusOr<FILE*> OpenForReading(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file != nullptr) return file;
  const int err = errno;
  std::string message = absl::StrCat(path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::PermissionDeniedError(message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExampleSource>> OpenCriteoStream(const std::string& path,
                                                                ReaderPosition start) {
  if (path == "-") {
    FILE* in = fdopen(dup(STDIN_FILENO), "rb");
    if (in == nullptr) return absl::InternalError(absl::StrCat("stdin: ", std::strerror(errno)));
    start.offset = 0;  // a pipe resumes with whatever comes next
    return std::unique_ptr<ExampleSource>(
        new CriteoFileSource("stdin", in, 1, start, StreamMode::kUntilEof));
  }
  absl::StatusOr<FILE*> opened = OpenForReading(path);
  if (!opened.ok()) return opened.status();
  FILE* file = *opened;
  if (lseek(fileno(file), off_t(start.offset), SEEK_SET) < 0) {
    std::fclose(file);
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot resume at offset ", start.offset));
  }
  return std::unique_ptr<ExampleSource>(
      new CriteoFileSource(path, file, 1, start, StreamMode::kFollow));
}

absl::StatusOr<std::unique_ptr<ExampleSource>> OpenCriteoFile(const std::string& path, int epochs,
                                                              ReaderPosition start) {
  if (epochs < 1) return absl::InvalidArgumentError(absl::StrCat("epochs ", epochs, " < 1"));
  absl::StatusOr<FILE*> opened = OpenForReading(path);
  if (!opened.ok()) return opened.status();
  FILE* file = *opened;
  if (std::fseek(file, 0, SEEK_END) != 0) {
    std::fclose(file);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a seekable file"));
  }
  const int64_t size = std::ftell(file);
  if (start.offset < 0 || start.offset > size || start.epoch < 0 || start.epoch >= epochs ||
      std::fseek(file, long(start.offset), SEEK_SET) != 0) {
    std::fclose(file);
    return absl::InvalidArgumentError(absl::StrCat(path, ": resume position epoch ", start.epoch,
                                                   " offset ", start.offset, " outside the file (",
                                                   size, " bytes)"));
  }
  return std::unique_ptr<ExampleSource>(new CriteoFileSource(path, file, epochs, start));
}

BatchReader::BatchReader(std::unique_ptr<ExampleSource> source, BatchReaderOptions options)
    : options_(options), source_(std::move(source)) {
  thread_ = std::thread([this] { Run(); });
}

BatchReader::~BatchReader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::Status BatchReader::Fill(ExampleBatch* batch, bool* end) {
  const int b = options_.batch_size;
  batch->labels.resize(b);
  batch->dense.resize(size_t(b) * kNumDense);
  batch->fids.resize(size_t(b) * kNumCategorical);
  batch->shard_positions.resize(options_.num_shards);
  for (auto& positions : batch->shard_positions) positions.clear();
  int n = 0;
  *end = false;
  while (n < b) {
    int64_t row = source_->NextRow();
    if (row == -1) {
      *end = true;
      break;
    }
    if (row >= 0 && !options_.filter.Keep(row)) {
      source_->SkipNext();
      continue;
    }
    absl::StatusOr<bool> got =
        source_->Next(&batch->labels[n], &batch->dense[size_t(n) * kNumDense],
                      &batch->fids[size_t(n) * kNumCategorical], &row);
    if (!got.ok()) return got.status();
    if (!*got) {
      *end = true;
      break;
    }
    if (options_.filter.Keep(row)) ++n;
  }
  batch->size = n;
  batch->end = source_->position();
  // Route every id to its owning shard, so shard workers receive their requests as one list.
  const uint32_t shards = uint32_t(options_.num_shards);
  for (uint32_t p = 0; p < uint32_t(n) * kNumCategorical; ++p) {
    batch->shard_positions[ShardOfFid(batch->fids[p], shards)].push_back(p);
  }
  if (options_.dedupe) Dedupe(batch);
  const int64_t lines = source_->lines(), malformed = source_->malformed();
  {
    absl::MutexLock lock(&mu_);
    lines_ = lines;
    malformed_ = malformed;
  }
  if ((lines >= 1000 || *end) && malformed > 0 &&
      double(malformed) > options_.max_malformed_fraction * double(lines)) {
    return absl::DataLossError(absl::StrCat(source_->name(), ": ", malformed, " of ", lines,
                                            " lines malformed, more than the allowed share ",
                                            options_.max_malformed_fraction,
                                            " (first: ", source_->first_malformed(), ")"));
  }
  return absl::OkStatus();
}

void BatchReader::Dedupe(ExampleBatch* batch) {
  const size_t shards = batch->shard_positions.size();
  batch->shard_keys.resize(shards);
  batch->shard_slots.resize(shards);
  // A power of two at least twice the ids of a full batch: probes stay short.
  const size_t ids = size_t(options_.batch_size) * kNumCategorical;
  if (dedupe_keys_.size() < 2 * ids) {
    const size_t capacity = std::bit_ceil(2 * ids);
    dedupe_keys_.assign(capacity, 0);
    dedupe_slots_.assign(capacity, 0);
    dedupe_stamps_.assign(capacity, 0);
    dedupe_stamp_ = 0;
  }
  const size_t mask = dedupe_keys_.size() - 1;
  for (size_t s = 0; s < shards; ++s) {
    if (++dedupe_stamp_ == 0) {  // wrapped: every stamp is stale again
      std::fill(dedupe_stamps_.begin(), dedupe_stamps_.end(), 0);
      dedupe_stamp_ = 1;
    }
    const std::vector<uint32_t>& positions = batch->shard_positions[s];
    std::vector<uint64_t>& keys = batch->shard_keys[s];
    std::vector<uint32_t>& slots = batch->shard_slots[s];
    keys.clear();
    slots.resize(positions.size());
    for (size_t k = 0; k < positions.size(); ++k) {
      const uint64_t id = batch->fids[positions[k]];
      // The shard's ids share their low hash bits' residue: probe from a mix of all bits.
      size_t h = size_t((id ^ (id >> 29)) * 0x9E3779B97F4A7C15ull >> 17) & mask;
      while (dedupe_stamps_[h] == dedupe_stamp_ && dedupe_keys_[h] != id) h = (h + 1) & mask;
      if (dedupe_stamps_[h] != dedupe_stamp_) {
        dedupe_stamps_[h] = dedupe_stamp_;
        dedupe_keys_[h] = id;
        dedupe_slots_[h] = uint32_t(keys.size());
        keys.push_back(id);
      }
      slots[k] = dedupe_slots_[h];
    }
  }
}

void BatchReader::Run() {
  while (true) {
    std::unique_ptr<ExampleBatch> batch;
    {
      absl::MutexLock lock(&mu_);
      auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || int(ready_.size()) < options_.queue_depth;
      };
      mu_.Await(absl::Condition(&room));
      if (stop_) return;
      if (!free_.empty()) {
        batch = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (batch == nullptr) batch = std::make_unique<ExampleBatch>();
    bool end = false;
    absl::Status status = Fill(batch.get(), &end);
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      status_ = status;
      done_ = true;
      return;
    }
    if (batch->size > 0) ready_.push_back(std::move(batch));
    if (end) {
      done_ = true;
      return;
    }
  }
}

absl::StatusOr<std::unique_ptr<ExampleBatch>> BatchReader::Next() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !ready_.empty() || done_; };
  mu_.Await(absl::Condition(&ready));
  if (!ready_.empty()) {
    std::unique_ptr<ExampleBatch> batch = std::move(ready_.front());
    ready_.pop_front();
    return batch;
  }
  if (!status_.ok()) return status_;
  return std::unique_ptr<ExampleBatch>();
}

void BatchReader::Recycle(std::unique_ptr<ExampleBatch> batch) {
  if (batch == nullptr) return;
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(batch));
}

bool BatchReader::WaitReady(double seconds) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](const BatchReader* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    return !r->ready_.empty() || r->done_ || !r->status_.ok();
                                  },
                                  this),
                              absl::Seconds(seconds));
}

int64_t BatchReader::lines() const {
  absl::MutexLock lock(&mu_);
  return lines_;
}

int64_t BatchReader::malformed() const {
  absl::MutexLock lock(&mu_);
  return malformed_;
}

}  // namespace evoscale::trainer
