// One replica of the toy model (toy_model.h) as an aggregation sees it: its
// parameters in registration order, flattened values and gradients, and the
// gradient of its rows of the global batch, for the in-process tests of
// gossip and timeout-hybrid.
#pragma once

#include <vector>

#include "tests/parallel/toy_model.h"

namespace braid::parallel::testing {

struct ToyReplica {
  ToyNet net;
  std::vector<NamedParameter> params;
  explicit ToyReplica(uint64_t seed) : net(seed) {
    for (auto& [name, t] : net.named_parameters()) params.push_back({name, t});
  }
  // Backward of its rows of global batch `step` into .grad (zeroed first);
  // returns that gradient, flattened.
  std::vector<double> backward_rows(int64_t step, int rank, int world) {
    for (auto& p : params) {
      if (p.tensor.grad().defined()) p.tensor.grad().fill(0);
    }
    auto [x, t] = global_batch<double>(step, world * kBatch);
    backward(mse(net.forward(slice(x, 0, rank * kBatch, (rank + 1) * kBatch)),
                 slice(t, 0, rank * kBatch, (rank + 1) * kBatch)));
    return grads();
  }
  std::vector<double> grads() const {
    std::vector<double> g;
    for (const auto& p : params) {
      const std::vector<double> part = p.tensor.grad().to_vector<double>();
      g.insert(g.end(), part.begin(), part.end());
    }
    return g;
  }
  std::vector<double> values() const {
    std::vector<double> v;
    for (const auto& p : params) {
      const std::vector<double> part = p.tensor.to_vector<double>();
      v.insert(v.end(), part.begin(), part.end());
    }
    return v;
  }
  void set(const std::vector<double>& v) {
    autograd::NoGradGuard no_grad;
    size_t at = 0;
    for (auto& p : params) {
      double* w = p.tensor.data<double>();
      for (int64_t i = 0; i < p.tensor.numel(); ++i) w[i] = v[at++];
    }
  }
  // The local optimizer: plain SGD with the gradient now in .grad.
  void sgd(double lr) {
    std::vector<double> v = values();
    const std::vector<double> g = grads();
    for (size_t i = 0; i < v.size(); ++i) v[i] -= lr * g[i];
    set(v);
  }
};

}  // namespace braid::parallel::testing
