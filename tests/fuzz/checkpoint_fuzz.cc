// Fuzzes the trainer's checkpoint reader: a MANIFEST, a shard's rows file and the dense file,
// written into a fresh checkpoint folder and read back as --resume does. Input: the three
// files' bytes, each prefixed by its length (FuzzedDataProvider). A bad file is DATA_LOSS or
// RESOURCE_EXHAUSTED, never a crash, a hang or an allocation the file's size does not justify.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "trainer/checkpoint.h"
#include "trainer/embedding_table.h"

namespace {

const std::string& Dir() {
  static const std::string* dir = [] {
    char path[] = "/tmp/checkpoint_fuzz.XXXXXX";
    if (mkdtemp(path) == nullptr) std::abort();
    return new std::string(path);
  }();
  return *dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace trainer = evoscale::trainer;
  FuzzedDataProvider in(data, size);
  const std::string folder = Dir() + "/" + trainer::CheckpointName(1);
  std::filesystem::remove_all(Dir());
  std::filesystem::create_directories(folder);
  WriteFile(folder + "/MANIFEST", in.ConsumeRandomLengthString(4096));
  WriteFile(folder + "/shard-0.rows", in.ConsumeRandomLengthString(1 << 16));
  WriteFile(folder + "/dense.bin", in.ConsumeRemainingBytesAsString());
  absl::StatusOr<trainer::CheckpointManifest> manifest = trainer::FindNewestCheckpoint(Dir());
  if (!manifest.ok()) return 0;
  if (manifest->dim > 64 || manifest->state_floats < 0 || manifest->state_floats > 64) {
    return 0;  // the trainer compares these with its flags before reading any rows
  }
  trainer::EmbeddingTableOptions options;
  options.dim = manifest->dim;
  options.state_floats = manifest->state_floats;
  options.max_rows = 1 << 16;
  options.track_changes = true;
  absl::StatusOr<std::unique_ptr<trainer::EmbeddingTable>> table =
      trainer::EmbeddingTable::Create(options);
  if (!table.ok()) return 0;
  (void)trainer::LoadShardCheckpoint(Dir(), *manifest, 0, **table);
  std::vector<float> params(37), m(37), v(37);
  int64_t adam_step = 0;
  (void)trainer::LoadDenseCheckpoint(Dir(), *manifest, &adam_step, params, m, v);
  return 0;
}
