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

// Every rank's rows of every shard, along each chain, into `t` (embeddings only).
absl::Status LoadRows(const Chosen& chosen, trainer::EmbeddingTable& t) {
  trainer::ShardRowsVisitor visit;
  visit.erased = [&](uint64_t key) { t.Erase(key); };
  visit.rows_start = [&](uint64_t rows) { return t.Reserve(t.size() + rows); };
  // The row's first dim values are its embedding (its optimizer state follows, unread).
  visit.row = [&](uint64_t key, uint32_t last_update, const float* values) {
    return t.Restore(key, last_update, values) != trainer::EmbeddingTable::kNoRow;
  };
  for (size_t r = 0; r < chosen.manifests.size(); ++r) {
    for (int s = 0; s < chosen.manifests[r].shards; ++s) {
      absl::Status status =
          trainer::ReadShardCheckpoint(chosen.layout.folders[r], chosen.manifests[r], s, visit);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& dir) {
  absl::StatusOr<Chosen> chosen = ChooseCheckpoint(dir);
  if (!chosen.ok()) return chosen.status();
  absl::StatusOr<std::vector<int>> sizes = CheckLayout(*chosen);
  if (!sizes.ok()) return sizes.status();
  const CheckpointManifest& first = chosen->manifests.front();

  std::unique_ptr<Model> model(new Model());
  absl::StatusOr<std::unique_ptr<trainer::Mlp>> mlp =
      trainer::Mlp::Create(*sizes, /*seed=*/0, trainer::DenseAdamConfig{});
  if (!mlp.ok()) return Refuse(NameOf(*chosen, 0), std::string(mlp.status().message()));
  model->mlp_ = *std::move(mlp);
  absl::Status status =
      trainer::LoadDenseParams(chosen->layout.folders[0], first, model->mlp_->params());
  if (!status.ok()) return status;
  // Serving needs no Adam moments.
  model->mlp_->adam_m() = {};
  model->mlp_->adam_v() = {};

  trainer::EmbeddingTableOptions options;
  options.dim = first.dim;
  options.state_floats = 0;
  absl::StatusOr<std::unique_ptr<trainer::EmbeddingTable>> table =
      trainer::EmbeddingTable::Create(options);
  if (!table.ok()) return table.status();
  model->table_ = *std::move(table);
  status = LoadRows(*chosen, *model->table_);
  if (!status.ok()) return status;

  ModelInfo& info = model->info_;
  info.dir = dir;
  info.step = chosen->layout.step;
  info.ranks = int(chosen->layout.folders.size());
  info.dim = first.dim;
  info.mlp_sizes = *sizes;
  info.optimizer = first.optimizer;
  info.rows = model->table_->size();
  info.memory_bytes = model->table_->memory_bytes() + model->mlp_->num_params() * sizeof(float);
  model->input_ = sizes->front();
  return model;
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
  s->ws = mlp_->NewWorkspace(kChunk);
  s->x.resize(size_t(kChunk) * input_);
  s->rows.resize(size_t(kChunk) * kNumCategorical);
  return s;
}

void Model::Release(std::unique_ptr<Scratch> scratch) const {
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(scratch));
}

void Model::PredictLogits(const float* dense, const uint64_t* fids, int n, float* logits) const {
  std::unique_ptr<Scratch> s = Acquire();
  const int dim = info_.dim;
  const size_t row_bytes = sizeof(float) * size_t(dim);
  for (int i0 = 0; i0 < n; i0 += kChunk) {
    const int m = std::min(kChunk, n - i0);
    // The trainer's input row: the 26 embeddings in slot order, then the 13 dense features.
    table_->FindBatch(fids + size_t(i0) * kNumCategorical, size_t(m) * kNumCategorical,
                      s->rows.data());
    for (int i = 0; i < m; ++i) {
      float* x = s->x.data() + size_t(i) * input_;
      const uint32_t* rows = s->rows.data() + size_t(i) * kNumCategorical;
      for (int f = 0; f < kNumCategorical; ++f) {
        if (rows[f] == trainer::EmbeddingTable::kNoRow) {
          std::memset(x + f * dim, 0, row_bytes);
        } else {
          std::memcpy(x + f * dim, table_->embedding(rows[f]), row_bytes);
        }
      }
      std::memcpy(x + kNumCategorical * dim, dense + size_t(i0 + i) * kNumDense,
                  sizeof(float) * kNumDense);
    }
    mlp_->Forward(s->ws, s->x.data(), m, logits + i0);
  }
  Release(std::move(s));
}

void Model::Predict(const float* dense, const uint64_t* fids, int n, float* probabilities) const {
  PredictLogits(dense, fids, n, probabilities);
  for (int i = 0; i < n; ++i) probabilities[i] = 1.0f / (1.0f + std::exp(-probabilities[i]));
}

}  // namespace evoscale::serve
