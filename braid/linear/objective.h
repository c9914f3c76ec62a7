// The regularised empirical risk every linear solver minimises:
//
//   P(w) = (1/n) sum_i loss(y_i, x_i . w) + (l2/2) |w|^2 + l1 |w|_1
//
// with LIBLINEAR's losses, so a LIBLINEAR run with cost C is the same problem
// with l2 = 1/(C n) (its L2-regularised solvers) or l1 = 1/(C n) (its L1 ones):
// LIBLINEAR minimises C n P(w).
//   squared         (y - z)^2                (regression)
//   logistic        log(1 + exp(-y z))
//   hinge           max(0, 1 - y z)          (non-smooth: dual solvers only)
//   squared_hinge   max(0, 1 - y z)^2
#pragma once

#include <span>
#include <string>
#include <vector>

#include "braid/linear/sparse.h"

namespace braid::linear_model {

enum class Loss { squared, logistic, hinge, squared_hinge };

Loss parse_loss(const std::string& name);
std::string loss_name(Loss loss);
bool is_classification(Loss loss);
bool is_smooth(Loss loss);

double loss_value(Loss loss, double y, double z);
// d loss / dz (a subgradient for hinge at its kink).
double loss_derivative(Loss loss, double y, double z);
// A bound on d^2 loss / dz^2 over all z (infinite for hinge).
double curvature_bound(Loss loss);

struct Regularizer {
  double l2 = 0;
  double l1 = 0;
};

struct Problem {
  Loss loss = Loss::logistic;
  Regularizer reg;
};

// x . w for every row.
void margins(const SparseMatrix& x, std::span<const double> w, std::span<double> z);
// Sum over rows of loss(y_i, z_i) (not divided by n: callers on several ranks
// add their parts first).
double loss_sum(Loss loss, std::span<const double> y, std::span<const double> z);
double regularizer_value(const Regularizer& reg, std::span<const double> w);
// P(w) on `data`.
double primal_objective(const Problem& p, const Examples& data, std::span<const double> w);
// Smooth part of P (loss + l2) and its gradient; l1 must be 0 or handled by
// the caller (a proximal step).
double smooth_objective(const Problem& p, const Examples& data, std::span<const double> w, std::span<double> grad);

// Classification: the fraction of rows with y_i (x_i . w) > 0. Regression:
// the root mean squared error.
double score(Loss loss, const Examples& data, std::span<const double> w);
std::string score_name(Loss loss);

}  // namespace braid::linear_model
