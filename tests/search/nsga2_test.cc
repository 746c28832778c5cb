#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "search/designers.h"
#include "search/types.h"

namespace evoscale::search {
namespace {

constexpr int kDims = 10;

std::array<double, 2> Zdt1(const ParameterDict& p) {
  std::vector<double> x;
  for (int i = 0; i < kDims; ++i) x.push_back(std::get<double>(p.at(absl::StrCat("x", i))));
  double sum = 0;
  for (int i = 1; i < kDims; ++i) sum += x[i];
  const double g = 1 + 9 * sum / (kDims - 1);
  return {x[0], g * (1 - std::sqrt(x[0] / g))};
}

double Hypervolume(std::vector<std::array<double, 2>> points) {
  std::sort(points.begin(), points.end());
  double volume = 0, best_f2 = 11;
  for (const auto& p : points) {
    if (p[0] >= 11 || p[1] >= best_f2) continue;
    volume += (11 - p[0]) * (best_f2 - p[1]);
    best_f2 = p[1];
  }
  return volume;
}

double RunZdt1(Algorithm algorithm, uint64_t seed, int budget, double threshold = -1) {
  ProblemStatement problem;
  for (int i = 0; i < kDims; ++i) {
    problem.space.parameters.push_back(
        {.name = absl::StrCat("x", i), .type = ParameterType::kDouble, .min = 0, .max = 1});
  }
  problem.metrics = {{.name = "f1", .goal = Goal::kMinimize},
                     {.name = "f2", .goal = Goal::kMinimize}};
  if (threshold > 0) {
    // A constraint: f1 <= threshold.
    problem.metrics.push_back(
        {.name = "c", .goal = Goal::kMinimize, .safety_threshold = threshold});
  }
  problem.algorithm = algorithm;
  problem.seed = seed;
  std::unique_ptr<Designer> designer = *CreateDesigner(problem);
  std::vector<std::array<double, 2>> points;
  std::vector<Trial> done;
  for (int64_t id = 0; id < budget; ++id) {
    designer->Update(done, {});
    done.clear();
    const ParameterDict p = (*designer->Suggest(1, id))[0];
    const std::array<double, 2> f = Zdt1(p);
    Trial t;
    t.id = id + 1;
    t.parameters = p;
    t.status = TrialStatus::kSucceeded;
    t.final_measurement.metrics = {{"f1", f[0]}, {"f2", f[1]}, {"c", f[0]}};
    if (threshold < 0 || f[0] <= threshold) points.push_back(f);
    done.push_back(t);
  }
  return Hypervolume(points);
}

TEST(Nsga2DesignerTest, BeatsRandomSearchOnZdt1) {
  for (uint64_t seed : {0, 1, 2}) {
    EXPECT_GT(RunZdt1(Algorithm::kNsga2, seed, 300), RunZdt1(Algorithm::kRandom, seed, 300))
        << "seed " << seed;
  }
}

TEST(Nsga2DesignerTest, ConstraintsSteerTheSearchToTheFeasibleRegion) {
  // Feasible: f1 = x0 <= 0.3. The hypervolume counts feasible points only.
  for (uint64_t seed : {0, 1}) {
    EXPECT_GT(RunZdt1(Algorithm::kNsga2, seed, 300, 0.3),
              RunZdt1(Algorithm::kRandom, seed, 300, 0.3))
        << "seed " << seed;
  }
}

}  // namespace
}  // namespace evoscale::search
