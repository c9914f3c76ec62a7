// Shared by the tensor- and pipeline-parallel tests: small models built the
// same way on every rank from a seed, batches, plain SGD, and a harness that
// runs a plan on in-process ranks and collects each rank's parameters by name.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/comm/transport/inproc.h"
#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/norm.h"
#include "braid/nn/sequential.h"
#include "braid/ops/shape.h"
#include "braid/optim/clip.h"
#include "braid/parallel/plan_factory.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid::parallel::testing {

using Params = std::map<std::string, std::vector<float>>;

// in 6 -> 16 -> 12 -> 5 classes: Linear, ReLU, Linear, ReLU, Linear.
inline std::shared_ptr<nn::Sequential> mlp(uint64_t seed) {
  Generator g(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(6, 16, g));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(16, 12, g));
  m->push_back(std::make_shared<nn::ReLU>());
  m->push_back(std::make_shared<nn::Linear>(12, 5, g));
  return m;
}

// vocab 11 (not divisible by 2, 3 or 4), context 8, width 12, 2 blocks.
inline constexpr int64_t kVocab = 11, kContext = 8;
inline std::shared_ptr<nn::Sequential> char_transformer(uint64_t seed, int64_t heads = 3, double dropout = 0,
                                                        Generator* dropout_gen = nullptr) {
  Generator g(seed);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::TokenPositionEmbedding>(kVocab, kContext, 12, g, dropout, dropout_gen));
  for (int i = 0; i < 2; ++i) {
    m->push_back(std::make_shared<nn::TransformerBlock>(
        12, heads, g, nn::AttentionOptions{.causal = true, .dropout = dropout, .generator = dropout_gen}));
  }
  m->push_back(std::make_shared<nn::LayerNorm>(Shape{12}));
  m->push_back(std::make_shared<nn::Linear>(12, kVocab, g));
  return m;
}

// Batch `step`: mlp inputs [rows, 6] f32 and class targets, or token
// windows [rows, kContext] and next tokens.
inline std::pair<Tensor, Tensor> batch(bool tokens, int64_t step, int64_t rows) {
  Generator g(500 + static_cast<uint64_t>(step));
  if (!tokens) {
    std::vector<float> x(static_cast<size_t>(rows * 6));
    for (float& v : x) v = static_cast<float>(g.normal());
    std::vector<int64_t> t(static_cast<size_t>(rows));
    for (int64_t& v : t) v = static_cast<int64_t>(g.next_u32() % 5);
    return {Tensor::from_vector(x, {rows, 6}), Tensor::from_vector(t, {rows})};
  }
  std::vector<int64_t> x(static_cast<size_t>(rows * kContext)), t(x.size());
  for (int64_t& v : x) v = static_cast<int64_t>(g.next_u32() % kVocab);
  for (int64_t& v : t) v = static_cast<int64_t>(g.next_u32() % kVocab);
  return {Tensor::from_vector(x, {rows, kContext}), Tensor::from_vector(t, {rows, kContext})};
}

inline void sgd(nn::Module& m, double lr) {
  autograd::NoGradGuard no_grad;
  for (const Tensor& p : m.parameters()) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    float* w = p.data<float>();
    const Tensor gc = g.contiguous();
    const float* d = gc.data<float>();
    for (int64_t i = 0; i < p.numel(); ++i) w[i] -= static_cast<float>(lr) * d[i];
    p.zero_grad();
  }
}

inline Params values(const nn::Module& m) {
  Params out;
  for (const auto& [name, t] : m.named_parameters()) out[name] = t.to_vector<float>();
  return out;
}

// K steps of the whole model in one process, whole batches; `first_norm`
// receives the global gradient norm of the first step.
inline Params train_single(std::shared_ptr<nn::Sequential> model, bool tokens, int steps, int64_t rows, double lr,
                           double* first_norm = nullptr) {
  set_num_threads(1);
  for (int s = 0; s < steps; ++s) {
    auto [x, t] = batch(tokens, s, rows);
    backward(nn::cross_entropy_loss(model->forward(x), t));
    if (s == 0 && first_norm) *first_norm = optim::grad_norm(model->parameters());
    sgd(*model, lr);
  }
  return values(*model);
}

struct RankResult {
  Params params;
  ShardSpecs specs;
  double first_grad_norm = 0;  // Plan::grad_norm() after the first step's backward
};

// K steps under make_plan(options) on `world` in-process ranks; every rank
// builds the whole model with `build` and reads its replica's rows of the
// batch. Returns each rank's parameters by name and its shard specs.
template <class Build>
std::vector<RankResult> train_planned(int world, PlanOptions options, Build build, bool tokens, int steps,
                                      int64_t rows, double lr) {
  std::vector<RankResult> got(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(options, comm, nullptr, build(), nn::cross_entropy_loss);
    pm.plan->setup(*pm.model, {});
    const int64_t per = rows / pm.plan->data_world(), first = per * pm.plan->data_rank();
    for (int s = 0; s < steps; ++s) {
      auto [x, t] = batch(tokens, s, rows);
      pm.plan->forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per), slice(t, 0, first, first + per));
      pm.plan->finish_gradients();
      if (s == 0) got[static_cast<size_t>(rank)].first_grad_norm = pm.plan->grad_norm();
      sgd(*pm.model, lr);
      pm.plan->after_step();
    }
    got[static_cast<size_t>(rank)].params = values(*pm.model);
    got[static_cast<size_t>(rank)].specs = pm.plan->shards();
  });
  return got;
}

// Every parameter a rank holds equals the whole model's (its slice of it,
// for a tensor-parallel shard) within `tol`.
inline void expect_matches_whole(const RankResult& mine, const Params& whole, double tol, const std::string& where) {
  for (const auto& [name, v] : mine.params) {
    ASSERT_TRUE(whole.count(name)) << where << ": " << name << " is not a parameter of the whole model";
    const auto& want = whole.at(name);
    const auto it = mine.specs.find(name);
    if (it == mine.specs.end()) {  // the whole tensor
      ASSERT_EQ(v.size(), want.size()) << where << ": " << name;
      for (size_t i = 0; i < v.size(); ++i) ASSERT_NEAR(v[i], want[i], tol) << where << ": " << name << "[" << i << "]";
      continue;
    }
    // The whole tensor as [outer, blocks, block, inner]; the slice as [outer, blocks, len, inner].
    const ShardSpec& sp = it->second;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < sp.dim; ++d) outer *= sp.full_shape[static_cast<size_t>(d)];
    for (size_t d = static_cast<size_t>(sp.dim) + 1; d < sp.full_shape.size(); ++d) inner *= sp.full_shape[d];
    const int64_t block = sp.full_shape[static_cast<size_t>(sp.dim)] / sp.blocks;
    const int64_t len = static_cast<int64_t>(v.size()) / (outer * sp.blocks * inner);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t b = 0; b < sp.blocks; ++b) {
        for (int64_t k = 0; k < len; ++k) {
          for (int64_t i = 0; i < inner; ++i) {
            const float a = v[static_cast<size_t>(((o * sp.blocks + b) * len + k) * inner + i)];
            const float w = want[static_cast<size_t>(((o * sp.blocks + b) * block + sp.offset + k) * inner + i)];
            ASSERT_NEAR(a, w, tol) << where << ": " << name << " (" << o << ", " << b << ", " << k << ", " << i << ")";
          }
        }
      }
    }
  }
}

}  // namespace braid::parallel::testing
