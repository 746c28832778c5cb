// Where a CPU training job keeps its checkpoints (checkpoint.h's ckpt-<step> folders) under
// its checkpoint_dir DIR, one layout per number of ranks:
//   a job of one process:  DIR/ckpt-<step>/...
//   a job of N ranks:      DIR/rank-R-of-N/ckpt-<step>/...  (each rank its own folder)
// A job that finds none of its own layout reshards from another one (FindOtherLayout) and, once
// every rank has written a checkpoint of its own, retires the old one (RetireLayout), so that
// no later resume takes it for the newest.
#ifndef EVOSCALE_TRAINER_INTERNAL_CHECKPOINT_LAYOUT_H_
#define EVOSCALE_TRAINER_INTERNAL_CHECKPOINT_LAYOUT_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace evoscale::trainer::internal {

// Rank `rank`'s folder in a job of `ranks` ("" when dir is: no checkpoints).
std::string RankCheckpointDir(const std::string& dir, int rank, int ranks);

// The checkpoint folders (ckpt-*, complete or not) in `dir`: all of them, or only those of
// steps after `newer_than`; sorted by step.
std::vector<std::filesystem::path> CheckpointFolders(
    const std::string& dir, std::optional<int64_t> newer_than = std::nullopt);

// Removes CheckpointFolders(dir, newer_than). Other files and folders stay; what cannot be
// removed is left.
void RemoveCheckpoints(const std::string& dir, std::optional<int64_t> newer_than = std::nullopt);

// The folders of another layout in `dir` than a job of `ranks`'s: the rank-Q-of-M folders of
// a job of M != ranks (M > 1) that hold a checkpoint, in rank order, or `dir` itself for a job
// of several when it holds a single process's checkpoint. Empty when there is none.
// FAILED_PRECONDITION when there are several other layouts, or not every folder of one.
absl::StatusOr<std::vector<std::string>> FindOtherLayout(const std::string& dir, int ranks);

// Removes the layout FindOtherLayout(dir, ...) answered `folders`: rank folders whole, a single
// process's checkpoints from `dir` (the rank folders beside them stay). Errors are ignored.
void RetireLayout(const std::string& dir, const std::vector<std::string>& folders);

}  // namespace evoscale::trainer::internal

#endif  // EVOSCALE_TRAINER_INTERNAL_CHECKPOINT_LAYOUT_H_
