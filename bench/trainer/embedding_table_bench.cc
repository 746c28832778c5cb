// The workload of ../shared/bench/hashmap/absl_embedding_bench.cc (find-or-insert plus a
// 16-float read-and-update per key; 20M Zipf(1.05) lookups over 2M distinct 64-bit keys; one
// thread) on absl::flat_hash_map (the peer's code, unchanged) and on our EmbeddingTable, in one
// run. Ours takes the keys in batches of kBatch (the trainer's access pattern: a batch's ids are
// known up front), so lookups can be prefetched; the update order per key is unchanged, so both
// checksums must agree.
//
// usage: embedding_table_bench [lookups=20000000] [universe=2000000]
#include <absl/container/flat_hash_map.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "trainer/embedding_table.h"

namespace {

std::vector<uint64_t> ZipfKeys(size_t n, size_t universe, double s, uint64_t seed) {
  std::vector<double> cdf(universe);
  double acc = 0;
  for (size_t i = 0; i < universe; ++i) cdf[i] = (acc += 1.0 / std::pow(double(i + 1), s));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, acc);
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) {
    size_t r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
    k = (r + 1) * 0x9E3779B97F4A7C15ull;  // scatter ranks over 64-bit space
  }
  return keys;
}

// The peer's loop, verbatim.
template <class Map>
double RunMap(const std::vector<uint64_t>& keys, int dim, double* checksum) {
  Map map;
  std::vector<float> arena;
  arena.reserve(size_t(dim) * 1100000);
  auto t = std::chrono::steady_clock::now();
  double sum = 0;
  for (uint64_t k : keys) {
    auto [it, inserted] = map.try_emplace(k, uint32_t(arena.size() / dim));
    if (inserted) arena.resize(arena.size() + dim, 0.01f);
    float* row = &arena[size_t(it->second) * dim];
    for (int d = 0; d < dim; ++d) {
      sum += row[d];
      row[d] -= 1e-4f;
    }  // lookup + sparse update
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  *checksum = sum + map.size();
  return keys.size() / s;
}

double RunEmbeddingTable(const std::vector<uint64_t>& keys, int dim, double* checksum,
                         size_t* bytes_per_row) {
  constexpr size_t kBatch = 1024;
  evoscale::trainer::EmbeddingTableOptions options;
  options.dim = dim;
  options.state_floats = 0;
  options.init = evoscale::trainer::EmbeddingTableOptions::Init::kConstant;
  options.init_value = 0.01f;
  auto created = evoscale::trainer::EmbeddingTable::Create(options);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().ToString().c_str());
    std::exit(1);
  }
  auto& table = **created;
  auto t = std::chrono::steady_clock::now();
  double sum = 0;
  for (size_t begin = 0; begin < keys.size(); begin += kBatch) {
    const size_t n = std::min(kBatch, keys.size() - begin);
    // The update runs as each lookup resolves, in key order, while the row is in cache.
    table.FindOrInsertBatch(&keys[begin], n, 0, [&](size_t, uint32_t r) {
      float* row = table.embedding(r);
      for (int d = 0; d < dim; ++d) {
        sum += row[d];
        row[d] -= 1e-4f;
      }
    });
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  *checksum = sum + table.size();
  *bytes_per_row = table.memory_bytes() / std::max<size_t>(1, table.size());
  return keys.size() / s;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 20000000;
  size_t universe = 2000000;
  CLI::App app("embedding_table_bench: lookups+inserts/s of EmbeddingTable and "
               "absl::flat_hash_map on Zipf keys, one JSON line",
               "embedding_table_bench");
  app.add_option("N", n, "keys looked up (default 20000000)")->check(CLI::PositiveNumber);
  app.add_option("UNIVERSE", universe, "distinct keys (default 2000000)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const int dim = 16;
  auto keys = ZipfKeys(n, universe, 1.05, 42);
  double c_absl = 0, c_ours = 0;
  size_t bytes_per_row = 0;
  // Three interleaved rounds (so neither gains from running second); medians compared.
  std::vector<double> absl_runs, ours_runs;
  for (int round = 0; round < 3; ++round) {
    absl_runs.push_back(RunMap<absl::flat_hash_map<uint64_t, uint32_t>>(keys, dim, &c_absl));
    ours_runs.push_back(RunEmbeddingTable(keys, dim, &c_ours, &bytes_per_row));
  }
  std::sort(absl_runs.begin(), absl_runs.end());
  std::sort(ours_runs.begin(), ours_runs.end());
  const double absl_ops = absl_runs[1], ours_ops = ours_runs[1];
  const nlohmann::ordered_json row = {
      {"n", n},
      {"universe", universe},
      {"dim", dim},
      {"absl_flat_hash_map_ops_per_s", std::llround(absl_ops)},
      {"evoscale_embedding_table_ops_per_s", std::llround(ours_ops)},
      {"ratio", std::round(ours_ops / absl_ops * 100) / 100},
      {"evoscale_bytes_per_row", bytes_per_row},
      {"check", c_absl == c_ours ? 1 : 0}};
  std::printf("%s\n", row.dump().c_str());
  return c_absl == c_ours ? 0 : 1;
}
