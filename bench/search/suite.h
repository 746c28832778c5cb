// The search suite: problems beyond the eight peer functions, to tune the designers on one
// part and report them on another they were never tuned on (bench/search/README.md lists the
// split). Rotated and shifted BBOB-style families in 20-50 dimensions (Hansen et al., "Real-
// parameter black-box optimization benchmarking 2009: noiseless functions definitions"),
// mixed HPO-like spaces with log-scaled, integer, categorical and conditional parameters and
// interactions, and noisy objectives; plus the multi-objective ZDT1-3 and DTLZ2 with their
// hypervolumes. Everything is minimised with optimum 0 (the HPO surfaces: 0 is a lower
// bound they reach at their best setting), so the figure compared is the regret f(best).
//
// One definition serves both sides: suite_bench runs evoscale's designers on these
// problems, and with --serve answers optuna_suite.py's evaluations over a pipe, so Optuna's
// samplers see exactly the same functions, noise draws and hypervolumes.
#ifndef EVOSCALE_BENCH_SEARCH_SUITE_H_
#define EVOSCALE_BENCH_SEARCH_SUITE_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "Eigen/Dense"
#include "search/internal/cma.h"
#include "search/internal/sampling.h"

namespace evoscale::bench {

struct SuiteParam {
  enum class Type { kFloat, kInt, kCategorical };
  std::string name;
  Type type = Type::kFloat;
  double low = 0, high = 0;  // kFloat, kInt
  bool log = false;
  std::vector<std::string> choices;  // kCategorical
  int parent = -1;                   // index of a categorical parent; -1 at top level
  std::vector<int> parent_choices;   // the parent's choice indices that activate this one
};

struct SuiteProblem {
  std::string name;
  std::string split;  // "tuning" or "held-out"
  std::vector<SuiteParam> params;
  // The true objective at one value per parameter: a number for kFloat, an integral number
  // for kInt, the choice index for kCategorical, NaN for an inactive parameter.
  std::function<double(const std::vector<double>&)> f;
  // Observed value from the true one and a standard normal draw; empty: deterministic.
  std::function<double(double, double)> noise;
};

// The standard normal draw of trial `index` of a study seeded `seed` on a noisy problem:
// the same for every optimiser, so noise is no one's luck.
inline double SuiteNoiseDraw(const std::string& problem, uint64_t seed, uint64_t index) {
  uint64_t h = 1469598103934665603ULL;
  for (char c : problem) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  search::internal::SplitMix64 rng(search::internal::StreamSeed(h ^ seed, index));
  return search::internal::NextGaussian(rng);
}

namespace suite_internal {

using Vec = Eigen::VectorXd;

// A random orthogonal matrix (Gram-Schmidt on a Gaussian one) and a shift in [-4, 4]^d,
// both fixed by `salt`.
inline Eigen::MatrixXd Rotation(int d, uint64_t salt) {
  search::internal::SplitMix64 rng(search::internal::StreamSeed(0xb0b, salt));
  Eigen::MatrixXd m(d, d);
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) m(i, j) = search::internal::NextGaussian(rng);
  }
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(m);
  return qr.householderQ() * Eigen::MatrixXd::Identity(d, d);
}

inline Vec Shift(int d, uint64_t salt) {
  search::internal::SplitMix64 rng(search::internal::StreamSeed(0x51f7, salt));
  Vec v(d);
  for (int i = 0; i < d; ++i) v[i] = -4 + 8 * rng.NextUnit();
  return v;
}

// BBOB's conditioning diagonal Lambda^alpha: alpha^(i / (2 (d - 1))).
inline Vec Conditioning(int d, double alpha) {
  Vec v(d);
  for (int i = 0; i < d; ++i) v[i] = std::pow(alpha, 0.5 * i / std::max(1, d - 1));
  return v;
}

// BBOB's T_osz: smooth, symmetry-breaking local irregularities.
inline double Osz(double x) {
  if (x == 0) return 0;
  const double xh = std::log(std::abs(x));
  const double c1 = x > 0 ? 10 : 5.5;
  const double c2 = x > 0 ? 7.9 : 3.1;
  return (x > 0 ? 1 : -1) * std::exp(xh + 0.049 * (std::sin(c1 * xh) + std::sin(c2 * xh)));
}

inline std::vector<SuiteParam> Box(int d, double low = -5, double high = 5) {
  std::vector<SuiteParam> params;
  for (int i = 0; i < d; ++i) {
    params.push_back({.name = "x" + std::to_string(i), .low = low, .high = high});
  }
  return params;
}

inline Vec AsVec(const std::vector<double>& x) {
  return Eigen::Map<const Vec>(x.data(), static_cast<Eigen::Index>(x.size()));
}

// A rotated, shifted BBOB-style problem on [-5, 5]^d: f(z) with z = R (x - x_opt).
inline SuiteProblem Rotated(std::string name, std::string split, int d, uint64_t salt,
                            std::function<double(const Vec&)> f_of_z) {
  const Eigen::MatrixXd r = Rotation(d, salt);
  const Vec shift = Shift(d, salt);
  return {.name = std::move(name),
          .split = std::move(split),
          .params = Box(d),
          .f = [=](const std::vector<double>& x) { return f_of_z(r * (AsVec(x) - shift)); },
          .noise = {}};
}

inline double Ellipsoid(const Vec& z) {
  const int d = static_cast<int>(z.size());
  double s = 0;
  for (int i = 0; i < d; ++i) s += std::pow(1e6, double(i) / std::max(1, d - 1)) * z[i] * z[i];
  return s;
}

inline double RastriginZ(const Vec& z) {
  const int d = static_cast<int>(z.size());
  const Vec c = Conditioning(d, 10);
  double s = 10.0 * d;
  for (int i = 0; i < d; ++i) {
    const double v = c[i] * z[i];
    s += v * v - 10 * std::cos(2 * std::numbers::pi * v);
  }
  return s;
}

// The Rosenbrock and Griewank-Rosenbrock families are rotated without a shift: BBOB puts
// their optimum at R^-1 (1 - 0.5) / scale, near the origin.
inline double RosenbrockS(const Vec& z) {
  double s = 0;
  for (Eigen::Index i = 0; i + 1 < z.size(); ++i) {
    s += 100 * std::pow(z[i] * z[i] - z[i + 1], 2) + std::pow(z[i] - 1, 2);
  }
  return s;
}

// A mixed HPO-like surface: the regret of a CTR model's validation loss over its settings.
// Values: see the parameter lists below. Every term is >= 0 and 0 at the best setting.
inline double LrTerm(double log10_lr, double best) { return 0.08 * std::pow(log10_lr - best, 2); }

}  // namespace suite_internal

// Every problem of the suite, tuning part first.
inline const std::vector<SuiteProblem>& Suite() {
  using namespace suite_internal;
  using T = SuiteParam::Type;
  static const std::vector<SuiteProblem> suite = [] {
    std::vector<SuiteProblem> s;
    // --- tuning part ---
    s.push_back(Rotated("ellipsoid_rot20", "tuning", 20, 1, Ellipsoid));
    s.push_back(Rotated("rastrigin_rot20", "tuning", 20, 2, RastriginZ));
    {
      const int d = 30;
      const Eigen::MatrixXd r = Rotation(d, 3);
      const double scale = std::max(1.0, std::sqrt(double(d)) / 8);
      s.push_back({.name = "rosenbrock_rot30", .split = "tuning", .params = Box(d),
                   .f = [=](const std::vector<double>& x) {
                     return RosenbrockS((scale * (r * AsVec(x))).array() + 0.5);
                   }});
    }
    {
      const int d = 20;
      const Eigen::MatrixXd r = Rotation(d, 4), q = Rotation(d, 40);
      const Vec shift = Shift(d, 4), c = Conditioning(d, 10);
      s.push_back({.name = "attractive_sector20", .split = "tuning", .params = Box(d),
                   .f = [=](const std::vector<double>& x) {
                     const Vec z = q * c.asDiagonal() * (r * (AsVec(x) - shift));
                     double sum = 0;
                     for (int i = 0; i < d; ++i) {
                       const double si = z[i] * shift[i] > 0 ? 100 : 1;
                       sum += si * si * z[i] * z[i];
                     }
                     return std::pow(Osz(sum), 0.9);
                   }});
    }
    s.push_back(Rotated("discus40", "tuning", 40, 5, [](const Vec& z) {
      return 1e6 * z[0] * z[0] + z.tail(z.size() - 1).squaredNorm();
    }));
    {
      // Gallagher's Gaussian peaks (BBOB f21 without T_osz): 101 local optima of random
      // heights and conditioning; the global one at x_opt.
      const int d = 20, peaks = 101;
      const Eigen::MatrixXd r = Rotation(d, 6);
      search::internal::SplitMix64 rng(search::internal::StreamSeed(0x9a11, 6));
      std::vector<Vec> centres;
      std::vector<Vec> conds;
      std::vector<double> weights;
      for (int k = 0; k < peaks; ++k) {
        Vec y(d);
        for (int i = 0; i < d; ++i) y[i] = (k == 0 ? -4 + 8 * rng.NextUnit() : -4.9 + 9.8 * rng.NextUnit());
        centres.push_back(y);
        const double alpha = k == 0 ? 1000 : std::pow(1000, 2.0 * (k - 1) / (peaks - 2));
        Vec c = Conditioning(d, alpha) / std::pow(alpha, 0.25);
        // a random permutation of the axes
        for (int i = d - 1; i > 0; --i) std::swap(c[i], c[static_cast<int>(rng.NextBelow(i + 1))]);
        conds.push_back(c);
        weights.push_back(k == 0 ? 10 : 1.1 + 8.0 * (k - 1) / (peaks - 2));
      }
      s.push_back({.name = "gallagher101_20", .split = "tuning", .params = Box(d),
                   .f = [=](const std::vector<double>& x) {
                     const Vec xv = AsVec(x);
                     double best = 0;
                     for (int k = 0; k < peaks; ++k) {
                       const Vec z = r * (xv - centres[k]);
                       const double q2 = (conds[k].array() * z.array().square()).sum();
                       best = std::max(best, weights[k] * std::exp(-q2 / (2.0 * d)));
                     }
                     return (10 - best) * (10 - best);
                   }});
    }
    {
      // Mixed HPO-like space: the best learning rate depends on the optimiser and the
      // batch size, the best dropout on the model's capacity, weight decay matters for
      // AdamW only.
      std::vector<SuiteParam> p = {
          {.name = "lr", .low = 1e-5, .high = 1, .log = true},
          {.name = "batch", .type = T::kInt, .low = 16, .high = 4096, .log = true},
          {.name = "optimizer", .type = T::kCategorical, .choices = {"sgd", "adam", "adamw", "adagrad"}},
          {.name = "layers", .type = T::kInt, .low = 1, .high = 8},
          {.name = "units", .type = T::kInt, .low = 16, .high = 1024, .log = true},
          {.name = "dropout", .low = 0, .high = 0.8},
          {.name = "weight_decay", .low = 1e-8, .high = 1e-1, .log = true},
          {.name = "activation", .type = T::kCategorical, .choices = {"relu", "gelu", "tanh"}},
          {.name = "embedding_dim", .type = T::kInt, .low = 4, .high = 128, .log = true},
          {.name = "warmup_epochs", .type = T::kInt, .low = 0, .high = 10},
      };
      s.push_back({.name = "hpo_mixed10", .split = "tuning", .params = p,
                   .f = [](const std::vector<double>& v) {
                     const double lr = std::log10(v[0]), batch = std::log2(v[1]);
                     const int opt = static_cast<int>(v[2]);
                     const double layers = v[3], units = std::log2(v[4]), dropout = v[5];
                     const double wd = std::log10(v[6]);
                     const int act = static_cast<int>(v[7]);
                     const double emb = std::log2(v[8]), warmup = v[9];
                     const double best_lr[4] = {-1.0, -3.0, -3.0, -1.5};
                     // linear scaling: larger batches want larger learning rates
                     double f = LrTerm(lr, best_lr[opt] + 0.25 * (batch - 8));
                     f += 0.004 * std::pow(batch - 8, 2);
                     f += (const double[4]){0.03, 0.01, 0.0, 0.02}[opt];
                     const double capacity = layers * units;  // best around 3 x 2^8
                     f += 0.0008 * std::pow(capacity - 24, 2) / 10;
                     f += 0.05 * std::pow(dropout - 0.02 * std::max(0.0, capacity - 15), 2);
                     f += opt == 2 ? 0.006 * std::pow(wd + 3, 2) : 0.002 * std::pow(std::max(0.0, wd + 5), 2);
                     f += (const double[3]){0.005, 0.0, 0.02}[act];
                     f += 0.003 * std::pow(emb - 5, 2);
                     f += (lr > -2 ? 0.004 * std::pow(warmup - 5, 2) : 0.001 * warmup);
                     return f;
                   }});
    }
    {
      const int d = 20;
      const Vec shift = Shift(d, 8);
      s.push_back({.name = "noisy_sphere20", .split = "tuning", .params = Box(d),
                   .f = [=](const std::vector<double>& x) { return (AsVec(x) - shift).squaredNorm(); },
                   .noise = [](double f, double z) { return f * std::exp(0.5 * z); }});
    }
    // --- held-out part ---
    s.push_back(Rotated("bent_cigar30", "held-out", 30, 11, [](const Vec& z) {
      return z[0] * z[0] + 1e6 * z.tail(z.size() - 1).squaredNorm();
    }));
    s.push_back(Rotated("sharp_ridge20", "held-out", 20, 12, [](const Vec& z) {
      return z[0] * z[0] + 100 * z.tail(z.size() - 1).norm();
    }));
    s.push_back(Rotated("different_powers50", "held-out", 50, 13, [](const Vec& z) {
      const int d = static_cast<int>(z.size());
      double sum = 0;
      for (int i = 0; i < d; ++i) sum += std::pow(std::abs(z[i]), 2 + 4.0 * i / (d - 1));
      return std::sqrt(sum);
    }));
    {
      const int d = 20;
      const Eigen::MatrixXd r = Rotation(d, 14), q = Rotation(d, 140);
      const Vec shift = Shift(d, 14), c = Conditioning(d, 10);
      s.push_back({.name = "schaffers_f7_20", .split = "held-out", .params = Box(d),
                   .f = [=](const std::vector<double>& x) {
                     const Vec z = c.asDiagonal() * (q * (r * (AsVec(x) - shift)));
                     double sum = 0;
                     for (int i = 0; i + 1 < d; ++i) {
                       const double si = std::sqrt(z[i] * z[i] + z[i + 1] * z[i + 1]);
                       sum += std::sqrt(si) + std::sqrt(si) * std::pow(std::sin(50 * std::pow(si, 0.2)), 2);
                     }
                     return std::pow(sum / (d - 1), 2);
                   }});
    }
    {
      const int d = 20;
      const Eigen::MatrixXd r = Rotation(d, 15);
      const double scale = std::max(1.0, std::sqrt(double(d)) / 8);
      s.push_back({.name = "griewank_rosenbrock20", .split = "held-out", .params = Box(d),
                   .f = [=](const std::vector<double>& x) {
                     const Vec z = (scale * (r * AsVec(x))).array() + 0.5;
                     double sum = 0;
                     for (int i = 0; i + 1 < d; ++i) {
                       const double si = 100 * std::pow(z[i] * z[i] - z[i + 1], 2) + std::pow(z[i] - 1, 2);
                       sum += si / 4000 - std::cos(si);
                     }
                     return 10 + 10.0 * sum / (d - 1);
                   }});
    }
    {
      // Lunacek bi-Rastrigin (BBOB f24): two funnels, the better one the narrower.
      const int d = 20;
      const Eigen::MatrixXd r = Rotation(d, 16), q = Rotation(d, 160);
      const Vec c = Conditioning(d, 100);
      const double mu0 = 2.5, sd = 1 - 1 / (2 * std::sqrt(d + 20.0) - 8.2);
      const double mu1 = -std::sqrt((mu0 * mu0 - 1) / sd);
      search::internal::SplitMix64 rng(search::internal::StreamSeed(0x1a4, 16));
      Vec sign(d);
      for (int i = 0; i < d; ++i) sign[i] = rng.NextUnit() < 0.5 ? -1 : 1;
      s.push_back({.name = "lunacek20", .split = "held-out", .params = Box(d),
                   .f = [=](const std::vector<double>& x) {
                     const Vec xh = 2 * sign.cwiseProduct(AsVec(x));
                     const Vec z = q * c.asDiagonal() * (r * (xh.array() - mu0).matrix());
                     const double a = (xh.array() - mu0).square().sum();
                     const double b = d + sd * (xh.array() - mu1).square().sum();
                     double cosines = 0;
                     for (int i = 0; i < d; ++i) cosines += std::cos(2 * std::numbers::pi * z[i]);
                     return std::min(a, b) + 10 * (d - cosines);
                   }});
    }
    {
      // A conditional HPO space: a DCN-style model has cross layers, an MLP does not; SGD
      // has momentum, Adam its betas; the best learning rate depends on both choices.
      std::vector<SuiteParam> p = {
          {.name = "model", .type = T::kCategorical, .choices = {"mlp", "dcn", "deepfm"}},
          {.name = "cross_layers", .type = T::kInt, .low = 1, .high = 6, .parent = 0, .parent_choices = {1}},
          {.name = "fm_dim", .type = T::kInt, .low = 2, .high = 64, .log = true, .parent = 0, .parent_choices = {2}},
          {.name = "optimizer", .type = T::kCategorical, .choices = {"sgd", "adam"}},
          {.name = "momentum", .low = 0, .high = 0.99, .parent = 3, .parent_choices = {0}},
          {.name = "beta1", .low = 0.5, .high = 0.999, .parent = 3, .parent_choices = {1}},
          {.name = "lr", .low = 1e-5, .high = 1, .log = true},
          {.name = "l2", .low = 1e-9, .high = 1e-2, .log = true},
          {.name = "hidden", .type = T::kInt, .low = 32, .high = 2048, .log = true},
          {.name = "depth", .type = T::kInt, .low = 1, .high = 6},
          {.name = "batch", .type = T::kInt, .low = 64, .high = 16384, .log = true},
      };
      s.push_back({.name = "hpo_conditional11", .split = "held-out", .params = p,
                   .f = [](const std::vector<double>& v) {
                     const int model = static_cast<int>(v[0]), opt = static_cast<int>(v[3]);
                     const double lr = std::log10(v[6]), l2 = std::log10(v[7]);
                     const double hidden = std::log2(v[8]), depth = v[9], batch = std::log2(v[10]);
                     double f = (const double[3]){0.02, 0.0, 0.008}[model];
                     if (model == 1) f += 0.006 * std::pow(v[1] - 3, 2);
                     if (model == 2) f += 0.004 * std::pow(std::log2(v[2]) - 4, 2);
                     double best_lr = (opt == 0 ? -1.2 : -3.2) + 0.3 * (batch - 11);
                     if (opt == 0) {
                       f += 0.06 * std::pow(v[4] - 0.9, 2);
                       best_lr -= 0.8 * std::max(0.0, v[4] - 0.5);  // momentum: a smaller lr
                     } else {
                       f += 0.04 * std::pow(v[5] - 0.9, 2) + 0.005;
                     }
                     f += LrTerm(lr, best_lr);
                     f += 0.003 * std::pow(l2 + 6 - 0.3 * (hidden - 9), 2);
                     f += 0.002 * std::pow(hidden - 9 + 0.5 * (depth - 3), 2) + 0.003 * std::pow(depth - 3, 2);
                     f += 0.001 * std::pow(batch - 11, 2);
                     return f;
                   }});
    }
    {
      // The mixed space of hpo_mixed10 under evaluation noise (seeds, data order): the
      // figure is the true regret of the trial the optimiser saw as best.
      SuiteProblem noisy = s[6];
      noisy.name = "noisy_hpo_mixed10";
      noisy.split = "held-out";
      noisy.noise = [](double f, double z) { return f + 0.01 * z; };
      // a different optimum: shift the learning rate and capacity preferences
      const auto base = noisy.f;
      noisy.f = [base](const std::vector<double>& v) {
        std::vector<double> w = v;
        w[0] = std::min(1.0, v[0] * 10);          // best learning rates 10x lower
        w[4] = std::max(16.0, v[4] / 2);          // twice the units
        return base(w);
      };
      s.push_back(std::move(noisy));
    }
    return s;
  }();
  return suite;
}

// --- Multi-objective problems ---

struct MoProblem {
  std::string name;
  int dims = 0;
  int objectives = 0;
  std::function<std::vector<double>(const std::vector<double>&)> f;  // x in [0, 1]^dims
  std::vector<double> reference;  // hypervolume reference point
};

inline const std::vector<MoProblem>& MoSuite() {
  static const std::vector<MoProblem> problems = [] {
    auto zdt = [](int which) {
      return [which](const std::vector<double>& x) {
        const double f1 = x[0];
        double sum = 0;
        for (size_t i = 1; i < x.size(); ++i) sum += x[i];
        const double g = 1 + 9 * sum / static_cast<double>(x.size() - 1);
        const double r = f1 / g;
        double h = 0;
        if (which == 1) h = 1 - std::sqrt(r);
        if (which == 2) h = 1 - r * r;
        if (which == 3) h = 1 - std::sqrt(r) - r * std::sin(10 * std::numbers::pi * f1);
        return std::vector<double>{f1, g * h};
      };
    };
    std::vector<MoProblem> p = {
        {"zdt1", 10, 2, zdt(1), {11, 11}},
        {"zdt2", 10, 2, zdt(2), {11, 11}},
        {"zdt3", 10, 2, zdt(3), {11, 11}},
    };
    // DTLZ2 with 3 objectives and k = 10 (12 variables); the front is the unit sphere's
    // positive octant.
    p.push_back({"dtlz2", 12, 3,
                 [](const std::vector<double>& x) {
                   double g = 0;
                   for (size_t i = 2; i < x.size(); ++i) g += (x[i] - 0.5) * (x[i] - 0.5);
                   const double a = x[0] * std::numbers::pi / 2, b = x[1] * std::numbers::pi / 2;
                   return std::vector<double>{(1 + g) * std::cos(a) * std::cos(b),
                                              (1 + g) * std::cos(a) * std::sin(b),
                                              (1 + g) * std::sin(a)};
                 },
                 {1.1, 1.1, 1.1}});
    return p;
  }();
  return problems;
}

// The hypervolume `points` dominate up to `reference` (all minimised), 2 or 3 objectives:
// 2-D by a sweep, 3-D by slicing along the third objective (O(n^2 log n)).
inline double Hypervolume(std::vector<std::vector<double>> points, const std::vector<double>& reference) {
  auto hv2 = [](std::vector<std::array<double, 2>> pts, double r0, double r1) {
    std::sort(pts.begin(), pts.end());
    double volume = 0, best = r1;
    for (const auto& q : pts) {
      if (q[0] >= r0 || q[1] >= best) continue;
      volume += (r0 - q[0]) * (best - q[1]);
      best = q[1];
    }
    return volume;
  };
  if (reference.size() == 2) {
    std::vector<std::array<double, 2>> pts;
    for (const auto& q : points) pts.push_back({q[0], q[1]});
    return hv2(pts, reference[0], reference[1]);
  }
  std::vector<std::vector<double>> in;
  for (auto& q : points) {
    if (q[0] < reference[0] && q[1] < reference[1] && q[2] < reference[2]) in.push_back(q);
  }
  std::sort(in.begin(), in.end(), [](const auto& a, const auto& b) { return a[2] < b[2]; });
  double volume = 0;
  std::vector<std::array<double, 2>> slice;
  for (size_t i = 0; i < in.size(); ++i) {
    slice.push_back({in[i][0], in[i][1]});
    const double top = i + 1 < in.size() ? in[i + 1][2] : reference[2];
    volume += hv2(slice, reference[0], reference[1]) * (top - in[i][2]);
  }
  return volume;
}

}  // namespace evoscale::bench

#endif  // EVOSCALE_BENCH_SEARCH_SUITE_H_
