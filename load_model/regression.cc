#include "load_model/regression.h"

namespace evoscale::load_model {

OnlineLinearRegression::OnlineLinearRegression(int dim, double forgetting, double ridge)
    : forgetting_(forgetting),
      ridge_(ridge),
      xtx_(Eigen::MatrixXd::Zero(dim, dim)),
      xty_(Eigen::VectorXd::Zero(dim)),
      w_(Eigen::VectorXd::Zero(dim)) {}

void OnlineLinearRegression::Update(const Eigen::VectorXd& x, double y) {
  xtx_ = forgetting_ * xtx_ + x * x.transpose();
  xty_ = forgetting_ * xty_ + x * y;
  count_ = forgetting_ * count_ + 1;
  dirty_ = true;
}

const Eigen::VectorXd& OnlineLinearRegression::weights() {
  if (dirty_) {
    const Eigen::MatrixXd a =
        xtx_ + ridge_ * Eigen::MatrixXd::Identity(xtx_.rows(), xtx_.cols());
    w_ = a.ldlt().solve(xty_);
    dirty_ = false;
  }
  return w_;
}

double OnlineLinearRegression::Predict(const Eigen::VectorXd& x) { return weights().dot(x); }

}  // namespace evoscale::load_model
