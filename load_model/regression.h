// Online least squares (recursive, with exponential forgetting) on Eigen, for load-vs-usage
// and short-horizon demand models.
#ifndef EVOSCALE_LOAD_MODEL_REGRESSION_H_
#define EVOSCALE_LOAD_MODEL_REGRESSION_H_

#include <Eigen/Dense>

namespace evoscale::load_model {

// Minimises sum_i forgetting^(n-i) (y_i - w.x_i)^2 + ridge |w|^2 over the samples seen so
// far. Update is O(dim^2); Solve O(dim^3) and cached until the next update. Not thread-safe.
class OnlineLinearRegression {
 public:
  // forgetting in (0, 1]: 1 keeps everything; 0.995 has an effective memory of 200 samples.
  OnlineLinearRegression(int dim, double forgetting, double ridge);

  void Update(const Eigen::VectorXd& x, double y);
  // w.x with the current fit; 0 before any update.
  double Predict(const Eigen::VectorXd& x);
  const Eigen::VectorXd& weights();
  double effective_samples() const { return count_; }
  int dim() const { return static_cast<int>(xty_.size()); }

 private:
  const double forgetting_;
  const double ridge_;
  Eigen::MatrixXd xtx_;   // (dim, dim), decayed sum of x x^T.
  Eigen::VectorXd xty_;   // (dim), decayed sum of x y.
  Eigen::VectorXd w_;     // Cached solution.
  bool dirty_ = false;
  double count_ = 0;      // Decayed sample count.
};

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_REGRESSION_H_
