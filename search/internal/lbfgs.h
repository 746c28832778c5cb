// Limited-memory BFGS (Nocedal & Wright, algorithm 7.4) with a backtracking Armijo line
// search: the minimiser behind the Gaussian process's hyperparameters (gp_model.h). Small and
// unconstrained; the callers keep their variables in an unbounded space (logarithms) and let
// priors keep them sane.
//
// Cost: per iteration one or more evaluations of the objective plus O(memory x n).
#ifndef EVOSCALE_SEARCH_INTERNAL_LBFGS_H_
#define EVOSCALE_SEARCH_INTERNAL_LBFGS_H_

#include <functional>

#include "Eigen/Dense"

namespace evoscale::search::internal {

// The objective: its value at `x`, its gradient written to `*gradient` (sized as x). A
// non-finite value marks `x` as outside the domain: the line search backs off from it.
using Objective = std::function<double(const Eigen::VectorXd& x, Eigen::VectorXd* gradient)>;

struct LbfgsResult {
  Eigen::VectorXd x;  // the best point found
  double value = 0;   // the objective there
  int iterations = 0;
  int evaluations = 0;
};

// Minimises `objective` from `start` until the gradient's largest component is below
// `gradient_tolerance`, no step improves the value, or `max_iterations` iterations. Never
// returns a point worse than `start` (a start outside the domain comes back as it is, value
// infinity).
LbfgsResult MinimiseLbfgs(const Objective& objective, const Eigen::VectorXd& start,
                          int max_iterations, double gradient_tolerance);

}  // namespace evoscale::search::internal

#endif  // EVOSCALE_SEARCH_INTERNAL_LBFGS_H_
