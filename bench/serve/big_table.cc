// serve_big_table: a one-process trainer checkpoint whose table is as large as asked (no
// training: rows with the trainer's own initial values, an MLP with its initial weights), and a
// Criteo-layout file of examples whose ids all have rows, drawn uniformly over the table (every
// lookup a likely cache miss, as a table far larger than the caches serves). For
// bench/serve/sharded.py: a table larger than one replica's memory budget, served sharded.
//
//   OUT/ckpt/ckpt-00000000000000000001/   the checkpoint (evoscale-serve --model-dir OUT/ckpt)
//   OUT/examples.tsv                      --examples lines, label 0
//
// usage: serve_big_table --out OUT [--rows 20000000] [--examples 20000] [--dim 16]
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "trainer/checkpoint.h"
#include "trainer/criteo_reader.h"
#include "trainer/embedding_table.h"
#include "trainer/feature_id.h"
#include "trainer/mlp.h"

namespace {

using evoscale::trainer::kNumCategorical;
using evoscale::trainer::kNumDense;

constexpr int kFileShards = 8;  // table files, as a trainer of 8 threads writes them

int Fail(const std::string& what, const absl::Status& status) {
  std::cerr << "serve_big_table: " << what << ": " << status.message() << "\n";
  return 1;
}

// Field f's value v as the Criteo files write it (v >= 1: "" is the missing value).
std::string Hex(uint64_t v) { return absl::StrFormat("%08x", v); }

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  int64_t rows = 20'000'000, examples = 20'000;
  int dim = 16;
  CLI::App app("Writes a checkpoint of a large table and examples that look its rows up");
  app.add_option("--out", out, "output directory (created)")->required();
  app.add_option("--rows", rows, "embedding rows, spread evenly over the 26 fields")
      ->check(CLI::Range(int64_t(26), int64_t(1) << 28));
  app.add_option("--examples", examples)->check(CLI::Range(int64_t(1), int64_t(10'000'000)));
  app.add_option("--dim", dim)->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);

  const std::string dir = out + "/ckpt";
  std::filesystem::create_directories(dir);
  evoscale::trainer::EmbeddingTableOptions options;
  options.dim = dim;
  options.max_rows = size_t(rows) / kFileShards + (size_t{1} << 20);
  std::vector<std::unique_ptr<evoscale::trainer::EmbeddingTable>> tables;
  for (int s = 0; s < kFileShards; ++s) {
    auto table = evoscale::trainer::EmbeddingTable::Create(options);
    if (!table.ok()) return Fail("table", table.status());
    if (absl::Status st = (*table)->Reserve(size_t(rows) / kFileShards + 1024); !st.ok()) {
      return Fail("reserve", st);
    }
    tables.push_back(*std::move(table));
  }
  const uint64_t per_field = uint64_t(rows) / kNumCategorical;
  for (int f = 0; f < kNumCategorical; ++f) {
    for (uint64_t v = 1; v <= per_field; ++v) {
      uint64_t fid = 0;
      evoscale::trainer::ParseCategoricalFeature(Hex(v), f, &fid);
      tables[evoscale::trainer::ShardOfFid(fid, kFileShards)]->FindOrInsert(fid, 1);
    }
  }
  const std::string name = evoscale::trainer::CheckpointName(1);
  for (int s = 0; s < kFileShards; ++s) {
    absl::Status st =
        evoscale::trainer::WriteShardCheckpoint(dir, name, s, /*full=*/true, 1, *tables[s]);
    if (!st.ok()) return Fail("rows", st);
  }
  const std::vector<int> sizes = {kNumCategorical * dim + kNumDense, 256, 128, 1};
  auto mlp = evoscale::trainer::Mlp::Create(sizes, /*seed=*/1, {});
  if (!mlp.ok()) return Fail("mlp", mlp.status());
  const std::vector<float>& params = (*mlp)->params();
  const std::vector<float> zeros(params.size(), 0.0f);
  evoscale::trainer::CheckpointManifest manifest;
  manifest.step = 1;
  manifest.shards = kFileShards;
  manifest.dim = dim;
  manifest.optimizer = "sgd";
  manifest.mlp_sizes = absl::StrJoin(sizes, ",");
  manifest.full = true;
  manifest.chain = {name};
  if (absl::Status st =
          evoscale::trainer::WriteDenseAndManifest(dir, manifest, 0, params, zeros, zeros);
      !st.ok()) {
    return Fail("manifest", st);
  }

  std::mt19937_64 rng(7);
  std::uniform_int_distribution<uint64_t> value(1, per_field);
  std::uniform_int_distribution<int> numeric(0, 50);
  FILE* f = std::fopen((out + "/examples.tsv").c_str(), "w");
  if (f == nullptr) return Fail("examples.tsv", absl::InternalError("cannot write"));
  for (int64_t i = 0; i < examples; ++i) {
    std::string line = "0";
    for (int d = 0; d < kNumDense; ++d) absl::StrAppend(&line, "\t", numeric(rng));
    for (int c = 0; c < kNumCategorical; ++c) absl::StrAppend(&line, "\t", Hex(value(rng)));
    std::fprintf(f, "%s\n", line.c_str());
  }
  std::fclose(f);
  size_t held = 0;
  for (const auto& t : tables) held += t->size();
  std::cout << nlohmann::json{{"rows", held}, {"dim", dim}, {"model_dir", dir},
                              {"examples", out + "/examples.tsv"}}
                   .dump()
            << std::endl;
  return 0;
}
