// Optimizers for embedding rows, with their state stored in the row itself (embedding_table.h).
// Each Apply updates one row from the gradient summed over that row's occurrences in a batch,
// the way PyTorch's sparse optimizers apply a coalesced sparse gradient.
//
//   SGD      w -= lr * g                                                  (no state)
//   Adagrad  n += g^2; w -= lr * g / (sqrt(n) + eps)                       (state: n[dim])
//   FTRL     McMahan et al. 2013, per coordinate (alpha = lr)             (state: z[dim], n[dim])
//   Adam     m, v moments, bias correction by the row's own update count  (state: m, v, count)
//
// Stateless apart from the configuration: safe to share between threads.
#ifndef EVOSCALE_TRAINER_SPARSE_OPTIMIZER_H_
#define EVOSCALE_TRAINER_SPARSE_OPTIMIZER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::trainer {

enum class SparseOptimizerKind { kSgd, kAdagrad, kFtrl, kAdam };

absl::StatusOr<SparseOptimizerKind> ParseSparseOptimizerKind(absl::string_view name);
absl::string_view SparseOptimizerName(SparseOptimizerKind kind);

struct SparseOptimizerConfig {
  SparseOptimizerKind kind = SparseOptimizerKind::kAdagrad;
  float lr = 0.05f;
  float eps = 1e-10f;                // Adagrad (PyTorch's default); Adam uses adam_eps
  float initial_accumulator = 0.0f;  // Adagrad's n at insertion
  float beta1 = 0.9f, beta2 = 0.999f, adam_eps = 1e-8f;    // Adam
  float ftrl_beta = 1.0f, ftrl_l1 = 0.0f, ftrl_l2 = 0.0f;  // FTRL
};

class SparseOptimizer {
 public:
  explicit SparseOptimizer(const SparseOptimizerConfig& config) : config_(config) {}

  // Floats of state one row of `dim` needs.
  int StateFloats(int dim) const;
  // Sets the state of a freshly initialised row (FTRL derives z so that w keeps its init).
  void InitState(const float* w, float* state, int dim) const;
  // One step on a row: w[dim], its state, the summed gradient g[dim].
  void Apply(float* w, float* state, const float* g, int dim) const;

  const SparseOptimizerConfig& config() const { return config_; }

 private:
  const SparseOptimizerConfig config_;
};

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_SPARSE_OPTIMIZER_H_
