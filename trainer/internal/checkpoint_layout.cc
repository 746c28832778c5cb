#include "trainer/internal/checkpoint_layout.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "trainer/checkpoint.h"

namespace evoscale::trainer::internal {

std::string RankCheckpointDir(const std::string& dir, int rank, int ranks) {
  if (dir.empty() || ranks == 1) return dir;
  return absl::StrCat(dir, "/rank-", rank, "-of-", ranks);
}

std::vector<std::filesystem::path> CheckpointFolders(const std::string& dir,
                                                     std::optional<int64_t> newer_than) {
  // Names compare as their steps do: CheckpointName pads the step to 12 digits.
  const std::string after = newer_than.has_value() ? CheckpointName(*newer_than) : "";
  std::vector<std::filesystem::path> folders;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name > after) folders.push_back(entry.path());
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

void RemoveCheckpoints(const std::string& dir, std::optional<int64_t> newer_than) {
  std::error_code ec;
  for (const std::filesystem::path& folder : CheckpointFolders(dir, newer_than)) {
    std::filesystem::remove_all(folder, ec);
  }
}

absl::StatusOr<std::vector<std::string>> FindOtherLayout(const std::string& dir, int ranks) {
  std::map<int, std::map<int, std::string>> by_size;  // M -> Q -> folder
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int q = 0, m = 0;
    // Folders with a checkpoint only: a job that never wrote one left nothing to resume.
    if (std::sscanf(name.c_str(), "rank-%d-of-%d", &q, &m) == 2 && m != ranks && m > 1 && q >= 0 &&
        q < m && name == absl::StrCat("rank-", q, "-of-", m) &&
        FindNewestCheckpoint(entry.path().string()).ok()) {
      by_size[m][q] = entry.path().string();
    }
  }
  const bool single = ranks > 1 && FindNewestCheckpoint(dir).ok();
  if (by_size.size() + (single ? 1 : 0) > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint_dir ", dir,
        " holds checkpoints of several other numbers of ranks: keep one layout to resume from"));
  }
  std::vector<std::string> folders;
  if (single) {
    folders.push_back(dir);
  } else if (!by_size.empty()) {
    const auto& [m, found] = *by_size.begin();
    if (int(found.size()) != m) {
      return absl::FailedPreconditionError(absl::StrCat("checkpoint_dir ", dir, " holds ",
                                                        found.size(), " of the ", m,
                                                        " rank folders of a job of ", m, " ranks"));
    }
    for (const auto& [q, folder] : found) folders.push_back(folder);
  }
  return folders;
}

void RetireLayout(const std::string& dir, const std::vector<std::string>& folders) {
  std::error_code ec;
  for (const std::string& folder : folders) {
    if (folder != dir) {
      std::filesystem::remove_all(folder, ec);
    } else {
      // A single process's checkpoints live in the folder itself, beside the ranks' folders.
      RemoveCheckpoints(dir);
    }
  }
}

}  // namespace evoscale::trainer::internal
