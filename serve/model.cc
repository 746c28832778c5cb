#include "serve/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "trainer/checkpoint.h"
#include "trainer/feature_id.h"
#include "trainer/internal/checkpoint_layout.h"

namespace evoscale::serve {
namespace {

namespace fs = std::filesystem;
using trainer::CheckpointManifest;
using trainer::kNumCategorical;
using trainer::kNumDense;

// The steps of the complete checkpoints (those with a MANIFEST) in `folder`.
std::set<int64_t> Steps(const std::string& folder) {
  std::set<int64_t> steps;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (name.size() == trainer::CheckpointName(0).size() && name.rfind("ckpt-", 0) == 0 &&
        absl::SimpleAtoi(name.substr(5), &step) && fs::exists(entry.path() / "MANIFEST", ec)) {
      steps.insert(step);
    }
  }
  return steps;
}

std::string Folder(const std::string& path) { return fs::path(path).filename().string(); }

// One layout's folders and the newest step they all hold (-1: none in common).
struct Layout {
  std::vector<std::string> folders;
  int64_t step = -1;
  std::string why;  // when step is -1: the steps each folder holds
};

Layout Common(std::vector<std::string> folders) {
  Layout layout;
  layout.folders = std::move(folders);
  std::set<int64_t> common;
  std::vector<std::string> held;
  for (size_t i = 0; i < layout.folders.size(); ++i) {
    const std::set<int64_t> steps = Steps(layout.folders[i]);
    held.push_back(absl::StrCat(Folder(layout.folders[i]), " has steps [",
                                absl::StrJoin(steps, ","), "]"));
    if (i == 0) {
      common = steps;
    } else {
      std::set<int64_t> both;
      std::set_intersection(common.begin(), common.end(), steps.begin(), steps.end(),
                            std::inserter(both, both.begin()));
      common = std::move(both);
    }
  }
  if (!common.empty()) layout.step = *common.rbegin();
  layout.why = absl::StrJoin(held, ", ");
  return layout;
}

absl::Status Refuse(const std::string& where, const std::string& what) {
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint ", where, ": ", what, "; evoscale-serve refuses to start"));
}

// The checkpoint to serve in dir: one process's in dir itself, or a job's in its rank folders;
// where both are (a job resumed with another number of ranks, before the old layout is
// retired), the newer. Its folders and their manifests, rank 0 first.
struct Chosen {
  Layout layout;
  std::vector<CheckpointManifest> manifests;
};

absl::StatusOr<Chosen> ChooseCheckpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--model-dir ", dir, ": not a directory"));
  }
  Layout single = Common({dir});
  Layout job;
  absl::StatusOr<std::vector<std::string>> ranks = trainer::internal::FindOtherLayout(dir, 1);
  if (!ranks.ok() && single.step < 0) return ranks.status();
  if (ranks.ok() && !ranks->empty()) job = Common(*ranks);
  if (single.step < 0 && job.folders.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "--model-dir ", dir, ": no checkpoint (the trainer writes them with --checkpoint-dir)"));
  }
  if (single.step < 0 && job.step < 0) {
    return Refuse(dir, absl::StrCat("the ranks share no complete checkpoint (", job.why, ")"));
  }
  Chosen chosen;
  chosen.layout = job.step > single.step ? job : single;
  for (const std::string& folder : chosen.layout.folders) {
    absl::StatusOr<CheckpointManifest> m = trainer::FindCheckpoint(folder, chosen.layout.step);
    if (!m.ok()) return m.status();
    chosen.manifests.push_back(*std::move(m));
  }
  return chosen;
}

std::string NameOf(const Chosen& chosen, size_t rank) {
  return absl::StrCat(chosen.layout.folders.size() > 1
                          ? Folder(chosen.layout.folders[rank]) + "/" : std::string(),
                      trainer::CheckpointName(chosen.layout.step));
}

// The MLP's widths, once the checkpoint is of the trainer's layout (and every rank's the same).
absl::StatusOr<std::vector<int>> CheckLayout(const Chosen& chosen) {
  const CheckpointManifest& first = chosen.manifests.front();
  const std::string first_name = NameOf(chosen, 0);
  for (size_t r = 1; r < chosen.manifests.size(); ++r) {
    const CheckpointManifest& m = chosen.manifests[r];
    if (m.dim != first.dim) {
      return Refuse(NameOf(chosen, r), absl::StrCat("embedding dim ", m.dim, " where ",
                                                    first_name, " has ", first.dim));
    }
    if (m.mlp_sizes != first.mlp_sizes) {
      return Refuse(NameOf(chosen, r), absl::StrCat("MLP ", m.mlp_sizes, " where ", first_name,
                                                    " has ", first.mlp_sizes));
    }
  }
  std::vector<int> sizes;
  for (absl::string_view part : absl::StrSplit(first.mlp_sizes, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      return Refuse(first_name, absl::StrCat("mlp_sizes \"", first.mlp_sizes,
                                             "\" is not a list of positive widths"));
    }
    sizes.push_back(v);
  }
  const int want_input = kNumCategorical * first.dim + kNumDense;
  if (sizes.size() < 2 || sizes.front() != want_input) {
    return Refuse(first_name,
                  absl::StrCat("the MLP (", first.mlp_sizes, ") takes ", sizes.front(),
                               " inputs where the trainer's feature layout with embedding dim ",
                               first.dim, " gives ", want_input, " (", kNumCategorical, " x ",
                               first.dim, " + ", kNumDense, ")"));
  }
  if (sizes.back() != 1) {
    return Refuse(first_name, absl::StrCat("the MLP (", first.mlp_sizes, ") ends in ",
                                           sizes.back(), " outputs, not one click logit"));
  }
  return sizes;
}

// Every rank's rows of every shard, along each chain, into the serving tables (embeddings
// only), each row that keep(key) into tables[shard_of(key)]; RESOURCE_EXHAUSTED naming
// --memory-budget once `base` bytes and the tables' pass `budget` (0: none).
template <typename Keep, typename ShardOf>
absl::Status LoadRows(const Chosen& chosen, std::vector<trainer::EmbeddingTable*> tables,
                      uint32_t replicas, Keep keep, ShardOf shard_of, size_t base,
                      size_t budget) {
  const auto held = [&] {
    size_t bytes = base;
    for (const trainer::EmbeddingTable* t : tables) bytes += t->memory_bytes();
    return bytes;
  };
  size_t loaded = 0;
  bool over = false;
  trainer::ShardRowsVisitor visit;
  visit.erased = [&](uint64_t key) {
    if (keep(key)) tables[shard_of(key)]->Erase(key);
  };
  // Rows come in each file's index order (sorted by hash): a table that grows while they come
  // piles them into long probe clusters (a million rows loaded in 6 s instead of 0.2 s). Every
  // table is sized first for its share of the rows of all the files' full checkpoints (a file
  // holds the ids of one trainer shard, which land in only some of the tables: a file's own
  // count says nothing of one table's share).
  uint64_t total = 0;
  trainer::ShardRowsVisitor count;
  count.rows_start = [&](uint64_t rows) {
    total += rows;
    return absl::CancelledError("counted");  // the chain's first file: its full checkpoint
  };
  count.row = [](uint64_t, uint32_t, const float*) { return true; };
  for (size_t r = 0; r < chosen.manifests.size(); ++r) {
    for (int s = 0; s < chosen.manifests[r].shards; ++s) {
      absl::Status status =
          trainer::ReadShardCheckpoint(chosen.layout.folders[r], chosen.manifests[r], s, count);
      if (!status.ok() && !absl::IsCancelled(status)) return status;
    }
  }
  for (trainer::EmbeddingTable* t : tables) {
    absl::Status st = t->Reserve(total / (tables.size() * replicas) * 21 / 20 + 64);
    if (!st.ok()) return st;
  }
  // The row's first dim values are its embedding (its optimizer state follows, unread).
  visit.row = [&](uint64_t key, uint32_t last_update, const float* values) {
    if (!keep(key)) return true;  // another replica's
    if (budget > 0 && ++loaded % 65536 == 0 && held() > budget) return !(over = true);
    return tables[shard_of(key)]->Restore(key, last_update, values) !=
           trainer::EmbeddingTable::kNoRow;
  };
  for (size_t r = 0; r < chosen.manifests.size(); ++r) {
    for (int s = 0; s < chosen.manifests[r].shards; ++s) {
      absl::Status status =
          trainer::ReadShardCheckpoint(chosen.layout.folders[r], chosen.manifests[r], s, visit);
      if (!status.ok() && over) break;
      if (!status.ok()) return status;
    }
    if (over) break;
  }
  if (over || (budget > 0 && held() > budget)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "--memory-budget ", budget, ": passed after ", loaded, " rows (", held(),
        " bytes held); serve the table in more shards (--shard I/N on N replicas, a front "
        "with --shards) or give a larger budget"));
  }
  return absl::OkStatus();
}

// Logits to click probabilities, in place.
void ToProbabilities(float* v, int n) {
  for (int i = 0; i < n; ++i) v[i] = 1.0f / (1.0f + std::exp(-v[i]));
}

bool AllFinite(const float* v, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return false;
  }
  return true;
}

}  // namespace

uint32_t Model::ShardOf(uint64_t key) const {
  return trainer::ShardOfFid(key, lock_spread_) % kShards;
}

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir,
                                                   const LoadOptions& options) {
  return LoadImpl(dir, options, /*front=*/false);
}

absl::StatusOr<std::unique_ptr<Model>> Model::LoadFront(const std::string& dir,
                                                        const RowSourceFactory& rows) {
  absl::StatusOr<std::unique_ptr<Model>> model = LoadImpl(dir, LoadOptions(), /*front=*/true);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::unique_ptr<RowSource>> source = rows((*model)->info_);
  if (!source.ok()) return source.status();
  (*model)->remote_ = *std::move(source);
  return model;
}

absl::StatusOr<std::unique_ptr<Model>> Model::LoadImpl(const std::string& dir,
                                                       const LoadOptions& options, bool front) {
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards) {
    return absl::InvalidArgumentError(absl::StrCat("--shard ", options.shard, "/", options.shards,
                                                   ": want I/N with 0 <= I < N"));
  }
  absl::StatusOr<Chosen> chosen = ChooseCheckpoint(dir);
  if (!chosen.ok()) return chosen.status();
  absl::StatusOr<std::vector<int>> sizes = CheckLayout(*chosen);
  if (!sizes.ok()) return sizes.status();
  const CheckpointManifest& first = chosen->manifests.front();

  std::unique_ptr<Model> model(new Model());
  model->options_ = options;
  model->lock_spread_ = uint32_t(kShards) * uint32_t(options.shards);
  absl::StatusOr<std::unique_ptr<trainer::Mlp>> mlp = trainer::Mlp::CreateForInference(*sizes);
  if (!mlp.ok()) return Refuse(NameOf(*chosen, 0), std::string(mlp.status().message()));
  absl::Status status =
      trainer::LoadDenseParams(chosen->layout.folders[0], first, (*mlp)->params());
  if (!status.ok()) return status;
  model->mlp_.store(std::shared_ptr<const trainer::Mlp>(*std::move(mlp)));

  trainer::EmbeddingTableOptions table_options;
  table_options.dim = first.dim;
  table_options.state_floats = 0;
  table_options.max_rows = (size_t{1} << 28) / kShards;  // address space, committed as rows come
  std::vector<trainer::EmbeddingTable*> tables;
  for (Shard& shard : model->shards_) {
    absl::StatusOr<std::unique_ptr<trainer::EmbeddingTable>> table =
        trainer::EmbeddingTable::Create(table_options);
    if (!table.ok()) return table.status();
    absl::MutexLock lock(&shard.mu);
    shard.table = *std::move(table);
    tables.push_back(shard.table.get());
  }
  // Nothing else sees the model yet: the tables are filled without their locks.
  if (!front) {
    const Model* m = model.get();
    const uint32_t shards = uint32_t(options.shards), mine = uint32_t(options.shard);
    status = LoadRows(
        *chosen, tables, shards,
        [shards, mine](uint64_t key) {
          return shards == 1 || trainer::ShardOfFid(key, shards) == mine;
        },
        [m](uint64_t key) { return m->ShardOf(key); }, model->mlp_.load()->memory_bytes(),
        options.memory_budget);
    if (!status.ok()) return status;
  }

  ModelInfo& info = model->info_;
  info.dir = dir;
  info.step = chosen->layout.step;
  info.ranks = int(chosen->layout.folders.size());
  info.dim = first.dim;
  info.mlp_sizes = *sizes;
  info.optimizer = first.optimizer;
  info.rows = model->rows();
  info.memory_bytes = model->memory_bytes();
  info.placement = {options.shard, options.shards, front};
  model->input_ = sizes->front();
  model->sparse_version_ = info.step;
  model->dense_version_ = info.step;
  model->checkpoint_step_ = info.step;
  return model;
}

absl::StatusOr<Model::Checkpoints> Model::ListCheckpoints(const std::string& dir) {
  absl::StatusOr<Chosen> chosen = ChooseCheckpoint(dir);
  if (!chosen.ok()) return chosen.status();
  Checkpoints list;
  list.folders = chosen->layout.folders;
  std::set<int64_t> common = Steps(list.folders.front());
  for (size_t i = 1; i < list.folders.size(); ++i) {
    const std::set<int64_t> steps = Steps(list.folders[i]);
    std::erase_if(common, [&](int64_t step) { return !steps.contains(step); });
  }
  list.steps.assign(common.begin(), common.end());
  return list;
}

absl::Status Model::Reload() {
  absl::StatusOr<std::unique_ptr<Model>> loaded = LoadImpl(info_.dir, options_, info_.placement.front);
  if (!loaded.ok()) return loaded.status();
  Model& fresh = **loaded;
  if (fresh.info_.dim != info_.dim || fresh.info_.mlp_sizes != info_.mlp_sizes) {
    return absl::FailedPreconditionError(absl::StrCat(
        info_.dir, " step ", fresh.info_.step, ": embedding dim ", fresh.info_.dim, ", MLP ",
        absl::StrJoin(fresh.info_.mlp_sizes, ","), " where the served model has dim ", info_.dim,
        ", MLP ", absl::StrJoin(info_.mlp_sizes, ",")));
  }
  absl::MutexLock sync(&sync_mu_);
  for (int k = 0; k < kShards; ++k) {
    absl::MutexLock mine(&shards_[k].mu);
    absl::MutexLock theirs(&fresh.shards_[k].mu);
    std::swap(shards_[k].table, fresh.shards_[k].table);
  }
  mlp_.store(fresh.mlp_.load(std::memory_order_acquire), std::memory_order_release);
  sources_.clear();
  partial_.clear();
  info_.step = fresh.info_.step;
  info_.ranks = fresh.info_.ranks;
  info_.rows = fresh.info_.rows;
  info_.memory_bytes = fresh.info_.memory_bytes;
  checkpoint_step_.store(fresh.info_.step, std::memory_order_release);
  dense_version_.store(fresh.info_.step, std::memory_order_release);
  sparse_version_.store(fresh.info_.step, std::memory_order_release);
  return absl::OkStatus();
}

size_t Model::rows() const {
  size_t n = 0;
  for (const Shard& shard : shards_) {
    absl::ReaderMutexLock lock(&shard.mu);
    n += shard.table->size();
  }
  return n;
}

size_t Model::memory_bytes() const {
  size_t n = mlp_.load()->memory_bytes();
  for (const Shard& shard : shards_) {
    absl::ReaderMutexLock lock(&shard.mu);
    n += shard.table->memory_bytes();
  }
  return n;
}

std::map<std::string, int64_t> Model::source_versions() const {
  absl::MutexLock lock(&sync_mu_);
  return sources_;
}

std::unique_ptr<Model::Scratch> Model::Acquire() const {
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      std::unique_ptr<Scratch> s = std::move(free_.back());
      free_.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<Scratch>();
  s->ws = mlp_.load()->NewWorkspace(kChunk);  // every MLP swapped in has the same sizes
  s->x.resize(size_t(kChunk) * input_);
  s->rows.resize(size_t(kChunk) * kNumCategorical);
  s->keys.resize(size_t(kChunk) * kNumCategorical);
  s->order.resize(size_t(kChunk) * kNumCategorical);
  s->start.resize(kShards + 1);
  return s;
}

void Model::Release(std::unique_ptr<Scratch> scratch) const {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(scratch));
}

template <typename Dst>
void Model::GatherRows(const uint64_t* keys, size_t n, Scratch& s, Dst dst) const {
  const size_t row_bytes = sizeof(float) * size_t(info_.dim);
  // The positions grouped by shard (a counting sort), so each shard is locked once.
  uint32_t count[kShards + 1] = {};
  for (size_t p = 0; p < n; ++p) ++count[ShardOf(keys[p]) + 1];
  for (int k = 0; k < kShards; ++k) count[k + 1] += count[k];
  std::copy(count, count + kShards + 1, s.start.begin());
  for (size_t p = 0; p < n; ++p) s.order[count[ShardOf(keys[p])]++] = uint32_t(p);
  for (int k = 0; k < kShards; ++k) {
    const uint32_t b = s.start[k], e = s.start[k + 1];
    if (b == e) continue;
    for (uint32_t j = b; j < e; ++j) s.keys[j] = keys[s.order[j]];
    const Shard& shard = shards_[k];
    absl::ReaderMutexLock lock(&shard.mu);
    const trainer::EmbeddingTable& table = *shard.table;
    table.FindBatch(&s.keys[b], e - b, &s.rows[b]);
    for (uint32_t j = b; j < e; ++j) {
      float* to = dst(s.order[j]);
      if (s.rows[j] == trainer::EmbeddingTable::kNoRow) {
        std::memset(to, 0, row_bytes);
      } else {
        std::memcpy(to, table.embedding(s.rows[j]), row_bytes);
      }
    }
  }
}

void Model::Gather(const uint64_t* fids, int m, Scratch& s) const {
  const int dim = info_.dim;
  // The trainer's input row: the 26 embeddings in slot order, then the 13 dense features.
  GatherRows(fids, size_t(m) * kNumCategorical, s, [&](uint32_t p) {
    return s.x.data() + size_t(p / kNumCategorical) * input_ + (p % kNumCategorical) * dim;
  });
}

void Model::LogitsFromRows(const float* dense, const float* rows, int n, float* logits) const {
  std::unique_ptr<Scratch> s = Acquire();
  const std::shared_ptr<const trainer::Mlp> mlp = mlp_.load(std::memory_order_acquire);
  const size_t embedded = size_t(kNumCategorical) * info_.dim;
  for (int i0 = 0; i0 < n; i0 += kChunk) {
    const int m = std::min(kChunk, n - i0);
    for (int i = 0; i < m; ++i) {
      float* x = s->x.data() + size_t(i) * input_;
      std::memcpy(x, rows + size_t(i0 + i) * embedded, sizeof(float) * embedded);
      std::memcpy(x + embedded, dense + size_t(i0 + i) * kNumDense, sizeof(float) * kNumDense);
    }
    mlp->Forward(s->ws, s->x.data(), m, logits + i0);
  }
  Release(std::move(s));
}

void Model::ScoreRows(const float* dense, const float* rows, int n, int64_t version,
                      float* probabilities) const {
  LogitsFromRows(dense, rows, n, probabilities);
  ToProbabilities(probabilities, n);
  // The shards' oldest version, as this answer saw them (it moves back after a rollback).
  sparse_version_.store(version, std::memory_order_release);
}

absl::Status Model::CheckHeld(const char* field, const uint64_t* ids, size_t n) const {
  const uint32_t shards = uint32_t(info_.placement.shards);
  const uint32_t mine = uint32_t(info_.placement.shard);
  for (size_t i = 0; shards > 1 && i < n; ++i) {
    if (trainer::ShardOfFid(ids[i], shards) != mine) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, "[", i, "]: id ", ids[i], " is in shard ", trainer::ShardOfFid(ids[i], shards),
          " of ", shards, "; this replica holds shard ", mine));
    }
  }
  return absl::OkStatus();
}

absl::Status Model::Lookup(const uint64_t* keys, size_t n, float* out) const {
  if (absl::Status st = CheckHeld("keys", keys, n); !st.ok()) return st;
  if (info_.placement.front) {
    return absl::FailedPreconditionError("this replica is a front: it holds no rows");
  }
  std::unique_ptr<Scratch> s = Acquire();
  const size_t most = size_t(kChunk) * kNumCategorical, dim = size_t(info_.dim);
  for (size_t i0 = 0; i0 < n; i0 += most) {
    float* base = out + i0 * dim;
    GatherRows(keys + i0, std::min(most, n - i0), *s,
               [base, dim](uint32_t p) { return base + p * dim; });
  }
  Release(std::move(s));
  return absl::OkStatus();
}

absl::Status Model::PredictLogits(const float* dense, const uint64_t* fids, int n,
                                  float* logits) const {
  if (info_.placement.shards > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this replica holds shard ", info_.placement.shard, " of ", info_.placement.shards,
        " of the rows: ask a front (evoscale-serve --shards ADDR,...)"));
  }
  if (remote_ != nullptr) {
    std::vector<float> rows(size_t(n) * kNumCategorical * info_.dim);
    absl::StatusOr<int64_t> version = remote_->Lookup(fids, size_t(n) * kNumCategorical, rows.data());
    if (!version.ok()) return version.status();
    LogitsFromRows(dense, rows.data(), n, logits);
    sparse_version_.store(*version, std::memory_order_release);
    return absl::OkStatus();
  }
  std::unique_ptr<Scratch> s = Acquire();
  const std::shared_ptr<const trainer::Mlp> mlp = mlp_.load(std::memory_order_acquire);
  for (int i0 = 0; i0 < n; i0 += kChunk) {
    const int m = std::min(kChunk, n - i0);
    Gather(fids + size_t(i0) * kNumCategorical, m, *s);
    for (int i = 0; i < m; ++i) {
      std::memcpy(s->x.data() + size_t(i) * input_ + kNumCategorical * info_.dim,
                  dense + size_t(i0 + i) * kNumDense, sizeof(float) * kNumDense);
    }
    mlp->Forward(s->ws, s->x.data(), m, logits + i0);
  }
  Release(std::move(s));
  return absl::OkStatus();
}

void Model::ForEachRow(const std::function<void(uint64_t key, const float* embedding)>& fn) const {
  for (const Shard& shard : shards_) {
    absl::ReaderMutexLock lock(&shard.mu);
    const trainer::EmbeddingTable& table = *shard.table;
    table.ForEachRow([&](uint32_t row) { fn(table.header(row)->key, table.embedding(row)); });
  }
}

absl::Status Model::Predict(const float* dense, const uint64_t* fids, int n,
                            float* probabilities) const {
  absl::Status status = PredictLogits(dense, fids, n, probabilities);
  if (status.ok()) ToProbabilities(probabilities, n);
  return status;
}

absl::Status Model::CheckRows(const RowUpdate& u) const {
  if (u.dim != info_.dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim: ", u.dim, " where the served model's embeddings have ", info_.dim));
  }
  if (u.value_count != u.rows * size_t(info_.dim)) {
    return absl::InvalidArgumentError(absl::StrCat("values: ", u.value_count, " for ", u.rows,
                                                   " keys of dim ", info_.dim, " (want ",
                                                   u.rows * size_t(info_.dim), ")"));
  }
  for (size_t i = 0; i < u.rows; ++i) {
    if (!AllFinite(u.values + i * size_t(info_.dim), size_t(info_.dim))) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: row ", i, " (key ", u.keys[i], ") is not finite"));
    }
  }
  if (absl::Status st = CheckHeld("keys", u.keys, u.rows); !st.ok()) return st;
  if (absl::Status st = CheckHeld("erased", u.erased, u.erased_count); !st.ok()) return st;
  if (info_.placement.front) {
    return absl::FailedPreconditionError(
        "this replica is a front: its rows are on its shards (push them there)");
  }
  if (u.part < 0 || u.part >= std::max(1, u.parts)) {
    return absl::InvalidArgumentError(absl::StrCat("part: ", u.part, " where the version has ",
                                                   std::max(1, u.parts), " parts"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> Model::ApplyRows(const RowUpdate& u) {
  // Every check before anything is applied.
  if (absl::Status st = CheckRows(u); !st.ok()) return st;
  const int parts = std::max(1, u.parts);
  absl::MutexLock sync(&sync_mu_);
  const auto it = sources_.find(u.source);
  const int64_t last = it == sources_.end() ? info_.step : it->second;
  if (u.version <= last) {
    return absl::FailedPreconditionError(absl::StrCat(
        "version ", u.version, " of source \"", u.source, "\" is not newer than ",
        it == sources_.end() ? "the checkpoint's step " : "the version applied, ", last));
  }
  if (u.part > 0) {
    const auto open = partial_.find(u.source);
    if (open == partial_.end() || open->second != std::pair(u.version, u.part)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "part ", u.part, " of version ", u.version, " of source \"", u.source,
          "\" does not follow ",
          open == partial_.end()
              ? std::string("a part of it")
              : absl::StrCat("part ", open->second.second - 1, " of version ", open->second.first)));
    }
  }
  // By shard: each shard's part under its writer lock, once.
  std::vector<std::vector<uint32_t>> by_shard(kShards);
  for (size_t i = 0; i < u.rows; ++i) by_shard[ShardOf(u.keys[i])].push_back(uint32_t(i));
  std::vector<std::vector<uint64_t>> erased(kShards);
  for (size_t i = 0; i < u.erased_count; ++i) erased[ShardOf(u.erased[i])].push_back(u.erased[i]);
  size_t applied = 0;
  for (int k = 0; k < kShards; ++k) {
    if (by_shard[k].empty() && erased[k].empty()) continue;
    Shard& shard = shards_[k];
    absl::MutexLock lock(&shard.mu);
    trainer::EmbeddingTable& table = *shard.table;
    for (uint64_t key : erased[k]) table.Erase(key);
    for (uint32_t i : by_shard[k]) {
      // A full arena (2^28 rows over the shards) keeps the row's old value (or none).
      applied += table.Restore(u.keys[i], uint32_t(u.version), u.values + size_t(i) * info_.dim) !=
                 trainer::EmbeddingTable::kNoRow;
    }
  }
  if (u.part + 1 < parts) {
    partial_[u.source] = {u.version, u.part + 1};
    return applied;
  }
  partial_.erase(u.source);
  sources_[u.source] = u.version;
  int64_t oldest = sources_.begin()->second;
  for (const auto& [source, version] : sources_) oldest = std::min(oldest, version);
  sparse_version_.store(oldest, std::memory_order_release);
  return applied;
}

absl::StatusOr<std::unique_ptr<trainer::Mlp>> Model::NewDense(
    int64_t version, const std::vector<int>& sizes) const {
  if (version <= dense_version()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dense version ", version, " is not newer than the MLP served, ", dense_version()));
  }
  if (sizes != info_.mlp_sizes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mlp_sizes ", absl::StrJoin(sizes, ","), " where the served MLP is ",
        absl::StrJoin(info_.mlp_sizes, ",")));
  }
  return trainer::Mlp::CreateForInference(sizes);
}

absl::Status Model::SwapDense(int64_t version, std::unique_ptr<trainer::Mlp> mlp) {
  const std::vector<float>& params = mlp->params();
  if (!AllFinite(params.data(), params.size())) {
    return absl::InvalidArgumentError("params: a value is not finite");
  }
  absl::MutexLock sync(&sync_mu_);
  if (version <= dense_version()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "dense version ", version, " is not newer than the MLP served, ", dense_version()));
  }
  mlp_.store(std::shared_ptr<const trainer::Mlp>(std::move(mlp)), std::memory_order_release);
  dense_version_.store(version, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace evoscale::serve
