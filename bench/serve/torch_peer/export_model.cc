// serve_export: writes a trainer checkpoint's served model (as evoscale-serve loads it) as plain
// arrays, for bench/serve's peers in other runtimes (export_torchscript.py builds the libtorch
// peer's TorchScript module from them):
//   OUT/keys.u64   the rows' feature ids, little-endian uint64, one per row
//   OUT/rows.f32   their embeddings, float32, rows x dim, in the same order
//   OUT/mlp.f32    the MLP, float32: per layer l, W_l (sizes[l] x sizes[l+1], row-major; the
//                  layer computes x * W_l + b_l) then b_l; ReLU after every layer but the last
//   OUT/meta.json  {"dim", "mlp_sizes", "rows", "step", "dir"}
//
// usage: serve_export --model-dir DIR --out OUT
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"
#include "serve/model.h"

namespace {

bool WriteArray(const std::filesystem::path& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), std::streamsize(bytes));
  out.close();
  if (!out) std::cerr << "serve_export: cannot write " << path << "\n";
  return bool(out);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, out_dir;
  CLI::App app("Writes a served model as plain arrays for the peers' exporters");
  app.add_option("--model-dir", model_dir, "trainer checkpoint directory")->required();
  app.add_option("--out", out_dir, "output directory (created)")->required();
  CLI11_PARSE(app, argc, argv);

  auto model = evoscale::serve::Model::Load(model_dir);
  if (!model.ok()) {
    std::cerr << "serve_export: --model-dir: " << model.status().message() << "\n";
    return 1;
  }
  const evoscale::serve::ModelInfo& info = (*model)->info();
  std::vector<uint64_t> keys;
  std::vector<float> rows;
  (*model)->ForEachRow([&](uint64_t key, const float* embedding) {
    keys.push_back(key);
    rows.insert(rows.end(), embedding, embedding + info.dim);
  });
  const std::vector<float>& mlp = (*model)->dense()->params();
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  const std::filesystem::path out(out_dir);
  if (!WriteArray(out / "keys.u64", keys.data(), keys.size() * sizeof(uint64_t)) ||
      !WriteArray(out / "rows.f32", rows.data(), rows.size() * sizeof(float)) ||
      !WriteArray(out / "mlp.f32", mlp.data(), mlp.size() * sizeof(float))) {
    return 1;
  }
  const nlohmann::json meta = {{"dim", info.dim},     {"mlp_sizes", info.mlp_sizes},
                               {"rows", keys.size()}, {"step", info.step},
                               {"dir", info.dir}};
  std::ofstream(out / "meta.json") << meta.dump(1) << "\n";
  std::cout << meta.dump() << "\n";
  return 0;
}
