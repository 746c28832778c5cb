#include "load_model/trial_resource_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <Eigen/Dense>

#include "absl/strings/str_format.h"

namespace evoscale::load_model {

TrialResourceModel::TrialResourceModel(TrialResourceModelOptions options)
    : options_(options) {}

absl::Status TrialResourceModel::AddTrial(const TrialTelemetry& t) {
  auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  if (bad(t.peak_cpu_cores)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("trial telemetry: peak_cpu_cores %g must be finite and >= 0",
                        t.peak_cpu_cores));
  }
  if (bad(t.peak_memory_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("trial telemetry: peak_memory_bytes %g must be finite and >= 0",
                        t.peak_memory_bytes));
  }
  if (bad(t.gpus_used)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "trial telemetry: gpus_used %g must be finite and >= 0", t.gpus_used));
  }
  for (const auto& [name, value] : t.params) {
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("trial telemetry: parameter \"%s\" is not finite", name));
    }
  }
  trials_.push_back(t);
  return absl::OkStatus();
}

TrialResourceRequest TrialResourceModel::Predict(const TrialParams& params) const {
  TrialResourceRequest req;
  const double m = 1.0 + options_.safety_margin;
  if (trials_.empty()) {
    req.cpu_cores = options_.default_cpu_cores;
    req.memory_bytes = static_cast<int64_t>(options_.default_memory_bytes);
    req.gpus = options_.default_gpus;
    req.explanation = "no finished trials yet: defaults";
    return req;
  }
  std::set<std::string> names;
  for (const auto& t : trials_) {
    for (const auto& [name, v] : t.params) names.insert(name);
  }
  const std::vector<std::string> features(names.begin(), names.end());
  const int n = static_cast<int>(trials_.size());
  const int d = static_cast<int>(features.size()) + 1;

  auto value_of = [](const TrialParams& p, const std::string& name) {
    const auto it = p.find(name);
    return it == p.end() ? 0.0 : it->second;
  };
  double max_cpu = 0, max_mem = 0, max_gpu = 0;
  for (const auto& t : trials_) {
    max_cpu = std::max(max_cpu, t.peak_cpu_cores);
    max_mem = std::max(max_mem, t.peak_memory_bytes);
    max_gpu = std::max(max_gpu, t.gpus_used);
  }
  double cpu = max_cpu, mem = max_mem, gpu = max_gpu;
  std::string how = absl::StrFormat("largest of %d trials", n);
  if (n > d) {
    // Standardise so the ridge treats parameters of any scale alike.
    Eigen::VectorXd mean = Eigen::VectorXd::Zero(d - 1), scale = Eigen::VectorXd::Ones(d - 1);
    for (int j = 0; j < d - 1; ++j) {
      double s = 0, s2 = 0;
      for (const auto& t : trials_) {
        const double v = value_of(t.params, features[j]);
        s += v;
        s2 += v * v;
      }
      mean(j) = s / n;
      const double var = s2 / n - mean(j) * mean(j);
      scale(j) = var > 1e-24 ? std::sqrt(var) : 1.0;
    }
    Eigen::MatrixXd x(n, d);
    Eigen::MatrixXd y(n, 3);
    for (int i = 0; i < n; ++i) {
      x(i, 0) = 1.0;
      for (int j = 0; j < d - 1; ++j) {
        x(i, j + 1) = (value_of(trials_[i].params, features[j]) - mean(j)) / scale(j);
      }
      y(i, 0) = trials_[i].peak_cpu_cores;
      y(i, 1) = trials_[i].peak_memory_bytes;
      y(i, 2) = trials_[i].gpus_used;
    }
    Eigen::MatrixXd a = x.transpose() * x;
    a.diagonal().tail(d - 1).array() += options_.ridge * n;
    const Eigen::MatrixXd w = a.ldlt().solve(x.transpose() * y);
    const Eigen::MatrixXd resid = y - x * w;
    Eigen::VectorXd q(d);
    q(0) = 1.0;
    for (int j = 0; j < d - 1; ++j) q(j + 1) = (value_of(params, features[j]) - mean(j)) / scale(j);
    const Eigen::VectorXd pred = w.transpose() * q;
    const double dof = std::max(n - d, 1);
    auto rmse = [&](int k) { return std::sqrt(resid.col(k).squaredNorm() / dof); };
    cpu = pred(0) + 2 * rmse(0);
    mem = pred(1) + 2 * rmse(1);
    gpu = pred(2) + 2 * rmse(2);
    how = absl::StrFormat("linear fit on %d parameters over %d trials (+2 rmse)", d - 1, n);
  }
  req.cpu_cores = std::max(cpu * m, options_.min_cpu_cores);
  req.memory_bytes = static_cast<int64_t>(std::ceil(std::max(mem * m, options_.min_memory_bytes)));
  // GPUs are whole devices; a trial that used a fraction of one still needs one.
  req.gpus = max_gpu > 0 ? std::max(1, static_cast<int>(std::ceil(gpu - 1e-9))) : 0;
  req.explanation = absl::StrFormat("%s, margin %.0f%%", how, 100 * options_.safety_margin);
  return req;
}

}  // namespace evoscale::load_model
