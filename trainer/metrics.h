// Evaluation metrics for binary click prediction, and process memory.
#ifndef EVOSCALE_TRAINER_METRICS_H_
#define EVOSCALE_TRAINER_METRICS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace evoscale::trainer {

// Exact ROC AUC (the Mann-Whitney statistic; tied scores count one half). O(n log n). NaN when
// the labels are all of one class.
double ExactAuc(const std::vector<float>& scores, const std::vector<float>& labels);

// Mean binary cross-entropy of logits (numerically stable form). NaN for no examples.
double LogLossFromLogits(const std::vector<float>& logits, const std::vector<float>& labels);

// Accumulates (logit, label) pairs and answers AUC and logloss over them.
class BinaryMetrics {
 public:
  void Add(const float* logits, const float* labels, size_t n);
  double Auc() const { return ExactAuc(logits_, labels_); }
  double LogLoss() const { return LogLossFromLogits(logits_, labels_); }
  size_t count() const { return labels_.size(); }
  const std::vector<float>& logits() const { return logits_; }
  const std::vector<float>& labels() const { return labels_; }
  void Clear() {
    logits_.clear();
    labels_.clear();
  }

 private:
  std::vector<float> logits_, labels_;
};

// The peak resident set size of this process (VmHWM), in bytes; 0 if unknown.
uint64_t PeakRssBytes();
// The current resident set size (VmRSS), in bytes; 0 if unknown.
uint64_t CurrentRssBytes();

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_METRICS_H_
