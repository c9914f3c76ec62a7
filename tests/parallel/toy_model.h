// A two-layer model with a closed-form-free loss, small enough for many
// steps on many simulated ranks: the reference every data-parallel strategy
// is checked against (N ranks x batch b must match 1 process x batch N*b).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/nn/module.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/linear.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/parallel/grad_sync.h"

namespace braid::parallel::testing {

inline constexpr int64_t kIn = 5, kHidden = 7, kOut = 3, kBatch = 4, kSteps = 5;
inline constexpr double kLr = 0.1;

template <class T>
Tensor randn(const Shape& shape, Generator& g) {
  std::vector<T> v(static_cast<size_t>(numel(shape)));
  for (T& x : v) x = static_cast<T>(g.normal() * 0.5);
  return Tensor::from_vector(v, shape);
}

template <class T>
struct ToyModel {
  std::vector<NamedParameter> params;
  explicit ToyModel(uint64_t seed) {
    Generator g(seed);
    params = {{"fc1.weight", randn<T>({kHidden, kIn}, g)}, {"fc1.bias", randn<T>({kHidden}, g)},
              {"fc2.weight", randn<T>({kOut, kHidden}, g)}, {"fc2.bias", randn<T>({kOut}, g)}};
    for (auto& p : params) p.tensor.set_requires_grad();
  }
  Tensor loss(const Tensor& x, const Tensor& t) const {
    Tensor h = linear(x, params[0].tensor, params[1].tensor);
    Tensor y = linear(h * h, params[2].tensor, params[3].tensor);
    Tensor d = y - t;
    return mean(d * d);
  }
  void sgd_step() {
    autograd::NoGradGuard no_grad;
    for (auto& p : params) {
      T* w = p.tensor.data<T>();
      Tensor g = p.tensor.grad().contiguous();
      for (int64_t i = 0; i < p.tensor.numel(); ++i) w[i] -= static_cast<T>(kLr) * g.data<T>()[i];
      p.tensor.grad().fill(0);
    }
  }
  std::vector<std::vector<double>> values() const {
    std::vector<std::vector<double>> out;
    for (auto& p : params) out.push_back(p.tensor.to_vector<double>());
    return out;
  }
};

// The toy model as an nn::Module (its loss is a mean squared error).
class ToyNet final : public nn::Module {
 public:
  explicit ToyNet(uint64_t seed) : toy_(seed) {
    for (auto& p : toy_.params) {
      std::string name = p.name;
      std::replace(name.begin(), name.end(), '.', '_');
      register_parameter(name, p.tensor);
    }
  }
  Tensor forward(const Tensor& x) override {
    const auto& p = toy_.params;
    const Tensor h = linear(x, p[0].tensor, p[1].tensor);
    return linear(h * h, p[2].tensor, p[3].tensor);
  }
  ToyModel<double>& toy() { return toy_; }

 private:
  ToyModel<double> toy_;
};

inline Tensor mse(const Tensor& y, const Tensor& t) {
  const Tensor d = y - t;
  return mean(d * d);
}

// Batch `step` of the global data: rows [step*N*b, (step+1)*N*b).
template <class T>
std::pair<Tensor, Tensor> global_batch(int64_t step, int64_t rows) {
  Generator g(1000 + static_cast<uint64_t>(step));
  return {randn<T>({rows, kIn}, g), randn<T>({rows, kOut}, g)};
}

// One process, batch world * kBatch, kSteps SGD steps from ToyModel(7).
template <class T>
std::vector<std::vector<double>> train_single(int world) {
  set_num_threads(1);
  ToyModel<T> m(7);
  for (int64_t s = 0; s < kSteps; ++s) {
    auto [x, t] = global_batch<T>(s, world * kBatch);
    backward(m.loss(x, t));
    m.sgd_step();
  }
  return m.values();
}

}  // namespace braid::parallel::testing
