#include "trainer/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace evoscale::trainer {
namespace {

namespace fs = std::filesystem;

constexpr char kRowsMagic[8] = {'E', 'V', 'S', 'R', 'O', 'W', 'S', '2'};
constexpr char kDenseMagic[8] = {'E', 'V', 'S', 'D', 'N', 'S', 'E', '1'};
constexpr char kManifestFormat[] = "evoscale-trainer-checkpoint-1";

struct RowsHeader {
  char magic[8];
  uint32_t shard, dim, state_floats, full;
  uint64_t rows, erased, pending;
};

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Writes to path + ".tmp", then Commit syncs and renames it over path.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (file_ != nullptr) std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  }
  ~AtomicFile() {
    if (file_ != nullptr) {
      std::fclose(file_);
      std::remove(tmp_.c_str());
    }
  }
  bool ok() const { return file_ != nullptr && ok_; }
  void Write(const void* data, size_t bytes) {
    if (ok() && std::fwrite(data, 1, bytes, file_) != bytes) ok_ = false;
  }
  absl::Status Commit() {
    if (file_ == nullptr) return Errno(absl::StrCat("create ", tmp_));
    if (!ok_ || std::fflush(file_) != 0) return Errno(absl::StrCat("write ", tmp_));
    if (fsync(fileno(file_)) != 0) return Errno(absl::StrCat("fsync ", tmp_));
    std::fclose(file_);
    file_ = nullptr;
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      return Errno(absl::StrCat("rename ", tmp_, " -> ", path_));
    }
    return absl::OkStatus();
  }

 private:
  const std::string path_, tmp_;
  FILE* file_ = nullptr;
  bool ok_ = true;
};

void SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

absl::Status MakeDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create directory ", dir, ": ", ec.message()));
  return absl::OkStatus();
}

std::string ShardFile(const std::string& dir, const std::string& name, int shard) {
  return absl::StrCat(dir, "/", name, "/shard-", shard, ".rows");
}

bool ReadExact(FILE* f, void* data, size_t bytes) { return std::fread(data, 1, bytes, f) == bytes; }

uint64_t FileSize(FILE* f) {
  struct stat st;
  return fstat(fileno(f), &st) == 0 ? uint64_t(st.st_size) : 0;
}

// Whether a rows file of `size` bytes holds exactly what `header` says (no overflow: each count
// is compared with the size before it is multiplied).
bool SizeMatches(const RowsHeader& header, size_t floats, uint64_t size) {
  constexpr uint64_t kErased = sizeof(uint64_t), kPending = sizeof(uint64_t) + sizeof(uint32_t);
  const uint64_t row = sizeof(uint64_t) + sizeof(uint32_t) + floats * sizeof(float);
  if (size < sizeof(RowsHeader) || header.erased > size || header.pending > size ||
      header.rows > size) {
    return false;
  }
  return sizeof(RowsHeader) + header.erased * kErased + header.pending * kPending +
             header.rows * row ==
         size;
}

absl::StatusOr<CheckpointManifest> ReadManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  CheckpointManifest m;
  bool format_ok = false;
  std::string line;
  auto bad = [&](const std::string& key) {
    return absl::DataLossError(absl::StrCat(path, ": bad value for \"", key, "\""));
  };
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    int64_t v = 0;
    const bool is_int = absl::SimpleAtoi(value, &v);
    if (key == "format") {
      format_ok = value == kManifestFormat;
    } else if (key == "chain") {
      m.chain = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (key == "optimizer") {
      m.optimizer = value;
    } else if (key == "mlp_sizes") {
      m.mlp_sizes = value;
    } else if (!is_int) {
      return bad(key);
    } else if (key == "step") {
      m.step = v;
    } else if (key == "examples") {
      m.examples = v;
    } else if (key == "epoch") {
      m.position.epoch = v;
    } else if (key == "row") {
      m.position.row = v;
    } else if (key == "offset") {
      m.position.offset = v;
    } else if (key == "shards") {
      m.shards = int(v);
    } else if (key == "dim") {
      m.dim = int(v);
    } else if (key == "state_floats") {
      m.state_floats = int(v);
    } else if (key == "full") {
      m.full = v != 0;
    }
  }
  if (!format_ok) return absl::DataLossError(absl::StrCat(path, ": not a trainer checkpoint"));
  if (m.chain.empty() || m.shards <= 0 || m.dim <= 0) return bad("chain/shards/dim");
  for (const std::string& name : m.chain) {
    // Folder names of this directory only (CheckpointName's form), never a path elsewhere.
    if (name.size() != CheckpointName(0).size() || name.rfind("ckpt-", 0) != 0 ||
        !std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return bad("chain");
    }
  }
  return m;
}

}  // namespace

std::string CheckpointName(int64_t step) { return absl::StrFormat("ckpt-%012d", step); }

absl::Status WriteShardCheckpoint(const std::string& dir, const std::string& name, int shard,
                                  bool full, uint32_t mark, EmbeddingTable& table) {
  absl::Status status = MakeDir(absl::StrCat(dir, "/", name));
  if (!status.ok()) return status;
  std::vector<uint32_t> rows;
  std::vector<uint64_t> erased;
  table.TakeChanges(mark, &rows, &erased);
  if (full) {
    rows.clear();
    erased.clear();
    rows.reserve(table.size());
    table.ForEachRow([&](uint32_t row) { rows.push_back(row); });
  }
  RowsHeader header{};
  std::memcpy(header.magic, kRowsMagic, sizeof(kRowsMagic));
  header.shard = uint32_t(shard);
  header.dim = uint32_t(table.dim());
  header.state_floats = uint32_t(table.state_floats());
  header.full = full ? 1 : 0;
  header.rows = rows.size();
  header.erased = erased.size();
  header.pending = table.pending().size();
  AtomicFile file(ShardFile(dir, name, shard));
  file.Write(&header, sizeof(header));
  file.Write(erased.data(), erased.size() * sizeof(uint64_t));
  // Occurrence counts of ids below their threshold: small, so every checkpoint has all of them.
  for (const auto& [key, count] : table.pending()) {
    file.Write(&key, sizeof(key));
    file.Write(&count, sizeof(count));
  }
  const size_t floats = size_t(table.dim()) + table.state_floats();
  for (uint32_t row : rows) {
    const RowHeader* h = table.header(row);
    file.Write(&h->key, sizeof(h->key));
    file.Write(&h->last_update, sizeof(h->last_update));
    file.Write(table.embedding(row), floats * sizeof(float));
  }
  return file.Commit();
}

absl::Status WriteDenseAndManifest(const std::string& dir, const CheckpointManifest& manifest,
                                   int64_t adam_step, const std::vector<float>& params,
                                   const std::vector<float>& m, const std::vector<float>& v,
                                   const std::string& keep_from) {
  const std::string name = manifest.chain.back();
  const std::string folder = absl::StrCat(dir, "/", name);
  absl::Status status = MakeDir(folder);
  if (!status.ok()) return status;
  {
    AtomicFile file(folder + "/dense.bin");
    const uint64_t count = params.size();
    file.Write(kDenseMagic, sizeof(kDenseMagic));
    file.Write(&count, sizeof(count));
    file.Write(&adam_step, sizeof(adam_step));
    file.Write(params.data(), count * sizeof(float));
    file.Write(m.data(), count * sizeof(float));
    file.Write(v.data(), count * sizeof(float));
    status = file.Commit();
    if (!status.ok()) return status;
  }
  std::string text = absl::StrCat(
      "format=", kManifestFormat, "\nstep=", manifest.step, "\nexamples=", manifest.examples,
      "\nepoch=", manifest.position.epoch, "\nrow=", manifest.position.row,
      "\noffset=", manifest.position.offset, "\nshards=", manifest.shards, "\ndim=", manifest.dim,
      "\nstate_floats=", manifest.state_floats, "\noptimizer=", manifest.optimizer,
      "\nmlp_sizes=", manifest.mlp_sizes, "\nfull=", manifest.full ? 1 : 0,
      "\nchain=", absl::StrJoin(manifest.chain, ","), "\n");
  {
    AtomicFile file(folder + "/MANIFEST");
    file.Write(text.data(), text.size());
    status = file.Commit();
    if (!status.ok()) return status;
  }
  SyncDir(folder);
  SyncDir(dir);
  // The chain's first element is the newest full checkpoint: older ones are no longer needed.
  const std::string& oldest_kept =
      !keep_from.empty() && keep_from < manifest.chain.front() ? keep_from : manifest.chain.front();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string entry_name = entry.path().filename().string();
    if (entry_name.rfind("ckpt-", 0) == 0 && entry_name < oldest_kept) {
      fs::remove_all(entry.path(), ec);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointManifest> FindCheckpoint(const std::string& dir, int64_t step) {
  const std::string path = absl::StrCat(dir, "/", CheckpointName(step), "/MANIFEST");
  if (!fs::exists(path)) {
    return absl::NotFoundError(absl::StrCat("no checkpoint of step ", step, " in ", dir));
  }
  return ReadManifest(path);
}

absl::StatusOr<CheckpointManifest> FindNewestCheckpoint(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && fs::exists(entry.path() / "MANIFEST")) {
      names.push_back(name);
    }
  }
  if (ec && names.empty()) {
    return absl::NotFoundError(absl::StrCat("checkpoint directory ", dir, ": ", ec.message()));
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return absl::NotFoundError(absl::StrCat("no checkpoint in ", dir));
  return ReadManifest(absl::StrCat(dir, "/", names.back(), "/MANIFEST"));
}

absl::Status LoadShardCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int shard, EmbeddingTable& table) {
  return LoadShardCheckpoint(dir, manifest, shard, table, nullptr);
}

absl::Status ReadShardCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int shard, const ShardRowsVisitor& visit) {
  const size_t floats = size_t(manifest.dim) + size_t(manifest.state_floats);
  std::vector<float> values(floats);
  for (const std::string& name : manifest.chain) {
    const std::string path = ShardFile(dir, name, shard);
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return absl::DataLossError(absl::StrCat(path, ": ", std::strerror(errno)));
    std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
    RowsHeader header;
    absl::Status status;
    if (!ReadExact(f, &header, sizeof(header)) ||
        std::memcmp(header.magic, kRowsMagic, sizeof(kRowsMagic)) != 0 ||
        header.shard != uint32_t(shard) || header.dim != uint32_t(manifest.dim) ||
        header.state_floats != uint32_t(manifest.state_floats)) {
      status = absl::DataLossError(absl::StrCat(path, ": header does not match shard ", shard,
                                                " dim ", manifest.dim, " state ",
                                                manifest.state_floats));
    } else if (const uint64_t size = FileSize(f); !SizeMatches(header, floats, size)) {
      // Checked before anything is sized from the counts: a corrupt count must not reserve
      // memory the file cannot fill.
      status = absl::DataLossError(absl::StrCat(
          path, ": ", size, " bytes do not hold the ", header.rows, " rows, ", header.erased,
          " erased keys and ", header.pending, " pending counts its header names"));
    }
    for (uint64_t i = 0; status.ok() && i < header.erased; ++i) {
      uint64_t key;
      if (!ReadExact(f, &key, sizeof(key))) {
        status = absl::DataLossError(absl::StrCat(path, ": truncated in erased keys"));
      } else if (visit.erased) {
        visit.erased(key);
      }
    }
    const bool newest = name == manifest.chain.back();
    if (status.ok() && visit.pending_start) visit.pending_start(newest);
    for (uint64_t i = 0; status.ok() && i < header.pending; ++i) {
      uint64_t key;
      uint32_t count;
      if (!ReadExact(f, &key, sizeof(key)) || !ReadExact(f, &count, sizeof(count))) {
        status = absl::DataLossError(absl::StrCat(path, ": truncated in pending counts"));
      } else if (visit.pending) {
        visit.pending(key, count, newest);
      }
    }
    if (status.ok() && visit.rows_start) status = visit.rows_start(header.rows);
    for (uint64_t i = 0; status.ok() && i < header.rows; ++i) {
      uint64_t key;
      uint32_t last_update;
      if (!ReadExact(f, &key, sizeof(key)) || !ReadExact(f, &last_update, sizeof(last_update)) ||
          !ReadExact(f, values.data(), floats * sizeof(float))) {
        status = absl::DataLossError(absl::StrCat(path, ": truncated at row ", i));
      } else if (!visit.row(key, last_update, values.data())) {
        status = absl::ResourceExhaustedError(absl::StrCat(path, ": table full at row ", i));
      }
    }
    std::fclose(f);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status LoadShardCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int shard, EmbeddingTable& table,
                                 const std::function<bool(uint64_t key)>& keep) {
  if (manifest.dim != table.dim() || manifest.state_floats != table.state_floats()) {
    return absl::DataLossError(absl::StrCat(dir, "/", manifest.chain.back(), ": dim ",
                                            manifest.dim, " state ", manifest.state_floats,
                                            " where the table has dim ", table.dim(), " state ",
                                            table.state_floats()));
  }
  ShardRowsVisitor visit;
  visit.erased = [&](uint64_t key) {
    if (!keep || keep(key)) table.Erase(key);
  };
  // Each file holds every pending count of its time: the newest file's replace older ones (a
  // reshard keeps only the chain's last file's, beside the other shards' already loaded).
  visit.pending_start = [&](bool) {
    if (!keep) table.ClearPending();
  };
  visit.pending = [&](uint64_t key, uint32_t count, bool newest) {
    if (!keep || (newest && keep(key))) table.RestorePending(key, count);
  };
  // Rows come in index order: reserve for all of them first (see EmbeddingTable::Reserve).
  visit.rows_start = [&](uint64_t rows) { return table.Reserve(table.size() + rows); };
  visit.row = [&](uint64_t key, uint32_t last_update, const float* values) {
    if (keep && !keep(key)) return true;  // another shard's row in the new layout
    return table.Restore(key, last_update, values) != EmbeddingTable::kNoRow;
  };
  return ReadShardCheckpoint(dir, manifest, shard, visit);
}

namespace {

// The dense state of manifest.chain.back(): the weights, and the Adam step and moments when m
// and v are given (without them the file's size is still checked whole).
absl::Status ReadDense(const std::string& dir, const CheckpointManifest& manifest,
                       int64_t* adam_step, std::vector<float>& params, std::vector<float>* m,
                       std::vector<float>* v) {
  const std::string path = absl::StrCat(dir, "/", manifest.chain.back(), "/dense.bin");
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::DataLossError(absl::StrCat(path, ": ", std::strerror(errno)));
  char magic[8];
  uint64_t count = 0;
  const bool moments = m != nullptr && v != nullptr;
  bool ok = ReadExact(f, magic, sizeof(magic)) &&
            std::memcmp(magic, kDenseMagic, sizeof(magic)) == 0 &&
            ReadExact(f, &count, sizeof(count)) && count == params.size() &&
            (moments || FileSize(f) == sizeof(magic) + sizeof(count) + sizeof(*adam_step) +
                                           3 * count * sizeof(float)) &&
            ReadExact(f, adam_step, sizeof(*adam_step)) &&
            ReadExact(f, params.data(), count * sizeof(float)) &&
            (!moments || (ReadExact(f, m->data(), count * sizeof(float)) &&
                          ReadExact(f, v->data(), count * sizeof(float))));
  std::fclose(f);
  if (!ok) {
    return absl::DataLossError(absl::StrCat(path, ": truncated, foreign, or ", count,
                                            " parameters where the model has ", params.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadDenseCheckpoint(const std::string& dir, const CheckpointManifest& manifest,
                                 int64_t* adam_step, std::vector<float>& params,
                                 std::vector<float>& m, std::vector<float>& v) {
  return ReadDense(dir, manifest, adam_step, params, &m, &v);
}

absl::Status LoadDenseParams(const std::string& dir, const CheckpointManifest& manifest,
                             std::vector<float>& params) {
  int64_t adam_step = 0;
  return ReadDense(dir, manifest, &adam_step, params, nullptr, nullptr);
}

}  // namespace evoscale::trainer
