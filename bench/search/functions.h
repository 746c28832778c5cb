// The benchmark objectives of ../shared/bench/hpo/functions.py, ported line by line (same
// definitions, bounds and optima; all minimised, optimum 0), and the ZDT1/ZDT2 problems with
// a two-objective hypervolume for the multi-objective check.
#ifndef EVOSCALE_BENCH_SEARCH_FUNCTIONS_H_
#define EVOSCALE_BENCH_SEARCH_FUNCTIONS_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

namespace evoscale::bench {

using Point = std::vector<double>;

inline double Sphere(const Point& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return s;
}

inline double Rosenbrock(const Point& x) {
  double s = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    s += 100 * std::pow(x[i + 1] - x[i] * x[i], 2) + std::pow(1 - x[i], 2);
  }
  return s;
}

inline double Rastrigin(const Point& x) {
  double s = 10.0 * static_cast<double>(x.size());
  for (double v : x) s += v * v - 10 * std::cos(2 * std::numbers::pi * v);
  return s;
}

inline double Ackley(const Point& x) {
  const double n = static_cast<double>(x.size());
  double s1 = 0, s2 = 0;
  for (double v : x) {
    s1 += v * v;
    s2 += std::cos(2 * std::numbers::pi * v);
  }
  s1 /= n;
  s2 /= n;
  return -20 * std::exp(-0.2 * std::sqrt(s1)) - std::exp(s2) + 20 + std::numbers::e;
}

inline double StyblinskiTang(const Point& x) {
  double s = 0;
  for (double v : x) s += std::pow(v, 4) - 16 * v * v + 5 * v;
  return s / 2 + 39.16616570377142 * static_cast<double>(x.size());
}

inline double Levy(const Point& x) {
  std::vector<double> w;
  for (double v : x) w.push_back(1 + (v - 1) / 4);
  double t = std::pow(std::sin(std::numbers::pi * w[0]), 2);
  for (size_t i = 0; i + 1 < w.size(); ++i) {
    t += std::pow(w[i] - 1, 2) * (1 + 10 * std::pow(std::sin(std::numbers::pi * w[i] + 1), 2));
  }
  const double last = w.back();
  return t + std::pow(last - 1, 2) * (1 + std::pow(std::sin(2 * std::numbers::pi * last), 2));
}

inline double Schwefel(const Point& x) {
  double s = 0;
  for (double v : x) s += v * std::sin(std::sqrt(std::abs(v)));
  return 418.9828872724339 * static_cast<double>(x.size()) - s;
}

inline double Hartmann6(const Point& x) {
  static constexpr double a[4][6] = {{10, 3, 17, 3.5, 1.7, 8},
                                     {0.05, 10, 17, 0.1, 8, 14},
                                     {3, 3.5, 1.7, 10, 17, 8},
                                     {17, 8, 0.05, 10, 0.1, 14}};
  static constexpr double p[4][6] = {{.1312, .1696, .5569, .0124, .8283, .5886},
                                     {.2329, .4135, .8307, .3736, .1004, .9991},
                                     {.2348, .1451, .3522, .2883, .3047, .6650},
                                     {.4047, .8828, .8732, .5743, .1091, .0381}};
  static constexpr double c[4] = {1.0, 1.2, 3.0, 3.2};
  double s = 0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0;
    for (int j = 0; j < 6; ++j) inner += a[i][j] * std::pow(x[j] - p[i][j], 2);
    s += c[i] * std::exp(-inner);
  }
  return -s + 3.32236801141551;
}

struct Function {
  std::string name;
  int dims;
  double lower, upper;
  double (*f)(const Point&);
  double optimum;
};

// FUNCTIONS of functions.py, in its order.
inline const std::vector<Function>& Functions() {
  static const std::vector<Function> functions = {
      {"sphere10", 10, -5.12, 5.12, Sphere, 0.0},
      {"rosenbrock10", 10, -5.0, 10.0, Rosenbrock, 0.0},
      {"rastrigin10", 10, -5.12, 5.12, Rastrigin, 0.0},
      {"ackley10", 10, -32.768, 32.768, Ackley, 0.0},
      {"styblinski10", 10, -5.0, 5.0, StyblinskiTang, 0.0},
      {"levy10", 10, -10.0, 10.0, Levy, 0.0},
      {"schwefel10", 10, -500.0, 500.0, Schwefel, 0.0},
      {"hartmann6", 6, 0.0, 1.0, Hartmann6, 0.0},
  };
  return functions;
}

// ZDT1 and ZDT2 (Zitzler, Deb and Thiele 2000), x in [0, 1]^n, both objectives minimised.
inline std::array<double, 2> Zdt(int which, const Point& x) {
  const double f1 = x[0];
  double sum = 0;
  for (size_t i = 1; i < x.size(); ++i) sum += x[i];
  const double g = 1 + 9 * sum / static_cast<double>(x.size() - 1);
  const double ratio = f1 / g;
  const double h = which == 1 ? 1 - std::sqrt(ratio) : 1 - ratio * ratio;
  return {f1, g * h};
}

// The hypervolume dominated by `points` (both objectives minimised) up to `reference`.
inline double Hypervolume2D(std::vector<std::array<double, 2>> points,
                            std::array<double, 2> reference) {
  std::sort(points.begin(), points.end());
  double volume = 0;
  double best_f2 = reference[1];
  for (const auto& p : points) {
    if (p[0] >= reference[0] || p[1] >= best_f2) continue;
    volume += (reference[0] - p[0]) * (best_f2 - p[1]);
    best_f2 = p[1];
  }
  return volume;
}

}  // namespace evoscale::bench

#endif  // EVOSCALE_BENCH_SEARCH_FUNCTIONS_H_
