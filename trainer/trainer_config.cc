#include "trainer/trainer_config.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer {

absl::Status ValidateConfig(const TrainerConfig& c) {
  auto bad = [](const std::string& message) { return absl::InvalidArgumentError(message); };
  if (c.train_path.empty() == (c.synthetic_rows <= 0)) {
    return bad("give exactly one of --train FILE and --synthetic ROWS");
  }
  if (c.epochs < 1) return bad(absl::StrCat("--epochs ", c.epochs, ": must be >= 1"));
  if (c.batch_size < 1 || c.batch_size > (1 << 20)) {
    return bad(absl::StrCat("--batch-size ", c.batch_size, ": must be in [1, 1048576]"));
  }
  if (c.embedding_dim < 1 || c.embedding_dim > 1024) {
    return bad(absl::StrCat("--embedding-dim ", c.embedding_dim, ": must be in [1, 1024]"));
  }
  for (int h : c.hidden) {
    if (h < 1 || h > 65536)
      return bad(absl::StrCat("--hidden: layer width ", h, " not in [1, 65536]"));
  }
  if (c.threads < 1 || c.threads > 256) {
    return bad(absl::StrCat("--threads ", c.threads, ": must be in [1, 256]"));
  }
  if (c.shards < 0 || c.shards > 4096) {
    return bad(absl::StrCat("--shards ", c.shards, ": must be in [1, 4096]"));
  }
  if (!(c.sparse.lr > 0) || !std::isfinite(c.sparse.lr)) {
    return bad(absl::StrCat("--lr-sparse ", c.sparse.lr, ": must be a positive number"));
  }
  if (!(c.lr_dense > 0) || !std::isfinite(c.lr_dense)) {
    return bad(absl::StrCat("--lr-dense ", c.lr_dense, ": must be a positive number"));
  }
  if (!(c.holdout_fraction >= 0 && c.holdout_fraction < 1)) {
    return bad(absl::StrCat("--holdout-fraction ", c.holdout_fraction, ": must be in [0, 1)"));
  }
  if (!(c.max_malformed_fraction >= 0 && c.max_malformed_fraction <= 1)) {
    return bad(
        absl::StrCat("--max-malformed-fraction ", c.max_malformed_fraction, ": must be in [0, 1]"));
  }
  if (c.resume && c.checkpoint_dir.empty()) return bad("--resume needs --checkpoint-dir DIR");
  if (c.full_checkpoint_every < 1) {
    return bad(absl::StrCat("--full-checkpoint-every ", c.full_checkpoint_every, ": must be >= 1"));
  }
  if (c.stream && c.train_path.empty()) {
    return bad("--stream needs --train FILE or --train - (stdin)");
  }
  if (c.stream && c.epochs != 1) return bad("--stream reads its examples once: drop --epochs");
  if (c.train_path == "-" && !c.stream) return bad("--train - (stdin) needs --stream");
  if (!(c.push_every_s > 0 && c.push_every_s <= 3600)) {
    return bad(absl::StrCat("--push-every ", c.push_every_s, ": must be in (0, 3600] seconds"));
  }
  if (!(c.dense_every_s > 0 && c.dense_every_s <= 86400)) {
    return bad(absl::StrCat("--dense-every ", c.dense_every_s, ": must be in (0, 86400] seconds"));
  }
  if (!c.serve.empty() && c.device != "cpu") return bad("--serve: only --device cpu pushes rows yet");
  if (c.device != "cpu" && c.device != "cuda") {
    return bad(absl::StrCat("--device \"", c.device, "\": expected cpu or cuda"));
  }
  return absl::OkStatus();
}

}  // namespace evoscale::trainer
