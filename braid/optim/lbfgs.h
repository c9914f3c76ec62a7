// L-BFGS (Nocedal, 1980) with an optional strong-Wolfe line search; a port of
// torch.optim.LBFGS (itself after minFunc). Deterministic full-batch method:
// the closure re-evaluates the objective, so it is given at construction and
// each step() runs up to max_iter iterations. The history, direction and
// line-search arithmetic run in double over a flat copy of all parameters
// (parameters themselves stay f32).
#pragma once

#include <deque>
#include <functional>

#include "braid/optim/optimizer.h"

namespace braid::optim {

struct LBFGSOptions {
  double lr = 1;
  int max_iter = 20;           // iterations per step()
  int max_eval = 0;            // objective evaluations per step(); 0: max_iter * 5 / 4
  double tolerance_grad = 1e-7;   // stop when max |g| falls below
  double tolerance_change = 1e-9; // stop when the step or loss change falls below
  int history_size = 100;
  bool strong_wolfe = true;    // false: fixed step lr (no line search)
};

class LBFGS final : public Optimizer {
 public:
  // closure: zeroes the gradients, evaluates the loss, runs backward, returns the loss.
  LBFGS(std::vector<Tensor> params, std::function<double()> closure, LBFGSOptions options);
  void step() override;
  std::string name() const override { return "lbfgs"; }
  bool works_on_shards() const override { return false; }
  // The loss the closure returned at the start of the last step().
  double last_loss() const { return last_loss_; }
  int64_t function_evaluations() const { return func_evals_; }

 private:
  using Vec = std::vector<double>;
  Vec flat_grad() const;
  Vec flat_params() const;
  void set_params(const Vec& x) const;
  void add_to_params(double t, const Vec& d) const;
  // Loss and gradient at x + t d; parameters are restored to x afterwards.
  std::pair<double, Vec> evaluate_at(const Vec& x, double t, const Vec& d);
  struct SearchResult { double loss; Vec grad; double t; int evals; };
  SearchResult strong_wolfe(const Vec& x, double t, const Vec& d, double f, const Vec& g, double gtd);

  std::function<double()> closure_;
  LBFGSOptions o_;
  // State carried between step() calls, as in torch.
  int64_t n_iter_ = 0, func_evals_ = 0;
  Vec d_, prev_grad_;
  double t_ = 0, h_diag_ = 1, prev_loss_ = 0, last_loss_ = 0;
  std::deque<Vec> old_dirs_, old_stps_;
  std::deque<double> ro_;
};

}  // namespace braid::optim
