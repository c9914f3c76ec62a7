// Sequence parallelism under tensor parallelism, and the tensor-parallel
// products overlapped with their collectives, over in-process ranks: a small
// decoder (learned positions and LayerNorm, or RoPE, RMSNorm, SwiGLU and a
// tied head) under TP 2 with sequence parallelism against one process: the
// first step's gradients to 1e-5 and 40 steps' losses to 1e-3 relative;
// with DP 2, PP 2 and the recompute modes; overlap on and off against each
// other (and the chunked products bit for bit); the refusals.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/ops/linear.h"
#include "braid/ops/shape.h"
#include "braid/parallel/plan_factory.h"
#include "braid/parallel/tensor_parallel/collectives.h"
#include "braid/parallel/tensor_parallel/overlap.h"
#include "braid/tensor/cpu/autotune.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

using testing::on_ranks;
using testing::Params;

// vocab 11, 8 tokens, width 16, 4 heads, 2 blocks: GPT-2's layout (learned
// positions, LayerNorm, GELU, biases, untied head) or LLaMA's (RoPE,
// RMSNorm, SwiGLU, no biases, tied head).
std::shared_ptr<nn::Sequential> decoder(uint64_t seed, bool rope) {
  Generator g(seed);
  auto m = std::make_shared<nn::Sequential>();
  auto embed = std::make_shared<nn::TokenPositionEmbedding>(testing::kVocab, rope ? 0 : testing::kContext, 16, g);
  m->push_back(embed);
  for (int i = 0; i < 2; ++i) {
    m->push_back(std::make_shared<nn::TransformerBlock>(
        16, 4, g, nn::AttentionOptions{.causal = true, .bias = !rope, .rope_theta = rope ? 10000.0 : 0.0},
        nn::BlockOptions{.norm = rope ? nn::NormKind::rms : nn::NormKind::layer,
                         .mlp = rope ? nn::MlpKind::swiglu : nn::MlpKind::gelu_tanh, .bias = !rope}));
  }
  m->push_back(rope ? nn::make_norm(nn::NormKind::rms, 16, 1e-6) : std::make_shared<nn::LayerNorm>(Shape{16}));
  if (rope) {
    m->push_back(std::make_shared<nn::TiedHead>(embed->tok()));
  } else {
    m->push_back(std::make_shared<nn::Linear>(16, testing::kVocab, g));
  }
  return m;
}

struct SpRun {
  std::vector<double> losses;  // per step
  Params first_grads;          // the first step's gradients, by name (this rank's slices)
  Params params;               // after the last step
  ShardSpecs specs;
};

Params grads_of(const nn::Module& m) {
  Params out;
  for (const auto& [name, t] : m.named_parameters()) {
    if (t.grad().defined()) out[name] = t.grad().to_vector<float>();
  }
  return out;
}

constexpr int64_t kRows = 4;
constexpr double kLr = 0.1;

SpRun train_whole(bool rope, int steps) {
  set_num_threads(1);
  auto model = decoder(5, rope);
  SpRun run;
  for (int s = 0; s < steps; ++s) {
    auto [x, t] = testing::batch(true, s, kRows);
    const Tensor loss = nn::cross_entropy_loss(model->forward(x), t);
    run.losses.push_back(loss.item());
    backward(loss);
    if (s == 0) run.first_grads = grads_of(*model);
    testing::sgd(*model, kLr);
  }
  run.params = testing::values(*model);
  return run;
}

std::vector<SpRun> train_planned(int world, const PlanOptions& o, bool rope, int steps) {
  std::vector<SpRun> runs(static_cast<size_t>(world));
  on_ranks(world, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(o, comm, nullptr, decoder(5, rope), nn::cross_entropy_loss);
    pm.plan->setup(*pm.model, {});
    SpRun& run = runs[static_cast<size_t>(rank)];
    const int64_t per = kRows / pm.plan->data_world(), first = per * pm.plan->data_rank();
    for (int s = 0; s < steps; ++s) {
      auto [x, t] = testing::batch(true, s, kRows);
      run.losses.push_back(pm.plan->forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per),
                                                     slice(t, 0, first, first + per)));
      pm.plan->finish_gradients();
      if (s == 0) run.first_grads = grads_of(*pm.model);
      testing::sgd(*pm.model, kLr);
      pm.plan->after_step();
    }
    run.params = testing::values(*pm.model);
    run.specs = pm.plan->shards();
  });
  return runs;
}

// TP 2 with sequence parallelism equals one process: the first step's
// gradients to 1e-5, each of 40 steps' losses to 1e-3 relative.
TEST(SequenceParallel, TrainsLikeOneProcess) {
  struct Setup {
    std::string name;
    PlanOptions options;
    int world;
    bool rope;
    int steps = 40;
  };
  using nn::Recompute;
  const std::vector<Setup> setups{
      {"TP 2 SP, learned positions, overlap", {.mesh = {.tensor = 2}, .sequence_parallel = true}, 2, false},
      {"TP 2 SP, rope, tied, overlap", {.mesh = {.tensor = 2}, .sequence_parallel = true}, 2, true},
      {"TP 2 SP, learned positions, blocking",
       {.mesh = {.tensor = 2}, .sequence_parallel = true, .tp_overlap = false}, 2, false},
      {"TP 2 SP, rope, full recompute",
       {.mesh = {.tensor = 2}, .sequence_parallel = true, .recompute = {.mode = Recompute::full}}, 2, true, 5},
      {"TP 2 SP, learned, selective recompute",
       {.mesh = {.tensor = 2}, .sequence_parallel = true, .recompute = {.mode = Recompute::selective}}, 2, false, 5},
      // (ZeRO on the data axis needs the trainer's optimizer: gpt_sp_launch.sh runs DP 2 x TP 2 SP with ZeRO-1.)
      {"DP 2 x TP 2 SP", {.mesh = {.data = 2, .tensor = 2}, .sequence_parallel = true}, 4, true, 5},
      {"PP 2 x TP 2 SP", {.mesh = {.tensor = 2, .pipeline = 2}, .sequence_parallel = true, .microbatches = 2}, 4,
       false, 5},
      // The weights' gradients deferred: the overlapped products compute dx, then dw alone.
      {"PP 2 x TP 2 SP, zero bubble",
       {.mesh = {.tensor = 2, .pipeline = 2}, .sequence_parallel = true, .microbatches = 2, .schedule = "zero_bubble"},
       4, false, 5},
  };
  const SpRun whole_learned = train_whole(false, 40), whole_rope = train_whole(true, 40);
  for (const Setup& s : setups) {
    SCOPED_TRACE(s.name);
    const SpRun& whole = s.rope ? whole_rope : whole_learned;
    const std::vector<SpRun> got = train_planned(s.world, s.options, s.rope, s.steps);
    for (int r = 0; r < s.world; ++r) {
      const SpRun& mine = got[static_cast<size_t>(r)];
      testing::expect_matches_whole({.params = mine.first_grads, .specs = mine.specs}, whole.first_grads, 1e-5,
                                    fmt::format("rank {} first gradients", r));
      // A pipeline's loss is known on its last stage.
      if (s.options.mesh.pipeline > 1 && r < s.world / 2) continue;
      // Each data replica's loss is its rows' mean: the step's is their mean (2 replicas at most here).
      const int data = s.options.mesh.data > 1 ? s.options.mesh.data : 1;
      const SpRun& other = got[static_cast<size_t>((r + s.world / data) % s.world)];
      for (int k = 0; k < s.steps; ++k) {
        const double want = whole.losses[static_cast<size_t>(k)];
        const auto step = static_cast<size_t>(k);
        const double have = data == 1 ? mine.losses[step] : (mine.losses[step] + other.losses[step]) / 2;
        ASSERT_NEAR(have, want, 1e-3 * std::abs(want)) << "rank " << r << " step " << k;
      }
    }
  }
}

// Overlap on and off compute each output row as the same dot products, and
// each weight gradient as one product over all rows; they differ only where
// OpenBLAS picks another kernel for a chunk's shape than for the whole
// (its small-matrix path), in the last bits: after 3 steps every parameter
// agrees to 1e-6 and every loss to 1e-6 relative, with and without sequence
// parallelism.
TEST(SequenceParallel, OverlapMatchesBlocking) {
  cpu::set_deterministic_kernels(true);
  for (bool sp : {true, false}) {
    for (bool rope : {false, true}) {
      SCOPED_TRACE(fmt::format("sequence parallel {}, rope {}", sp, rope));
      const auto on = train_planned(2, {.mesh = {.tensor = 2}, .sequence_parallel = sp, .tp_overlap = true}, rope, 3);
      const auto off = train_planned(2, {.mesh = {.tensor = 2}, .sequence_parallel = sp, .tp_overlap = false}, rope, 3);
      for (size_t r = 0; r < 2; ++r) {
        for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(on[r].losses[k], off[r].losses[k], 1e-6 * off[r].losses[k]);
        double worst = 0;
        for (const auto& [name, v] : on[r].params) {
          const auto& w = off[r].params.at(name);
          for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(v[i] - w[i])));
        }
        EXPECT_LE(worst, 1e-6) << "rank " << r;
        std::printf("sequence parallel %d rope %d rank %zu: largest parameter difference %.3g\n", sp, rope, r, worst);
      }
    }
  }
}

// The chunked products against the blocking collectives around linear, on
// segments whose rows the chunk count does not divide (5 rows in 3 chunks).
TEST(SequenceParallel, ChunkedProductsEqualTheBlockingOnes) {
  cpu::set_deterministic_kernels(true);
  const int t = 2;
  on_ranks(t, [&](int rank, comm::Communicator tp) {
    Generator g(40 + static_cast<uint64_t>(rank));
    auto rnd = [&](const Shape& s) {
      std::vector<float> v(static_cast<size_t>(numel(s)));
      for (float& f : v) f = static_cast<float>(g.normal());
      return Tensor::from_vector(v, s);
    };
    const Tensor x = rnd({2, 5, 6}), w = rnd({7, 6}), gy = rnd({2, 10, 7});
    const tensor_parallel::OverlapOptions o{.chunks = 3, .thread = std::make_shared<tensor_parallel::CommThread>()};
    auto run = [&](bool fused) {
      Tensor xi = x.clone(), wi = w.clone();
      xi.set_requires_grad();
      wi.set_requires_grad();
      const Tensor y = fused ? tensor_parallel::gather_linear(xi, wi, tp, o)
                             : linear(tensor_parallel::gather_sequence(xi, tp), wi);
      backward(y, gy);
      return std::vector<std::vector<float>>{y.to_vector<float>(), xi.grad().to_vector<float>(),
                                             wi.grad().to_vector<float>()};
    };
    EXPECT_EQ(run(true), run(false)) << "gather_linear";
    const Tensor xr = rnd({2, 10, 6}), gr = rnd({2, 5, 7});
    auto run_rs = [&](bool fused) {
      Tensor xi = xr.clone(), wi = w.clone();
      xi.set_requires_grad();
      wi.set_requires_grad();
      const Tensor y = fused ? tensor_parallel::linear_reduce_scatter(xi, wi, tp, o)
                             : tensor_parallel::reduce_scatter_sequence(linear(xi, wi), tp);
      backward(y, gr);
      return std::vector<std::vector<float>>{y.to_vector<float>(), xi.grad().to_vector<float>(),
                                             wi.grad().to_vector<float>()};
    };
    EXPECT_EQ(run_rs(true), run_rs(false)) << "linear_reduce_scatter";
  });
}

TEST(SequenceParallel, RefusesWhatItCannotSplit) {
  on_ranks(2, [&](int, comm::Communicator comm) {
    try {
      make_plan({.mesh = {.tensor = 2}, .sequence_parallel = true}, comm, nullptr, testing::mlp(1),
                nn::cross_entropy_loss);
      ADD_FAILURE() << "an MLP accepted under sequence parallelism";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("parallel.sequence_parallel splits the sequences of a language model"),
                std::string::npos)
          << e.what();
    }
    // 7 tokens do not split into 2 segments.
    PlannedModel pm = make_plan({.mesh = {.tensor = 2}, .sequence_parallel = true}, comm, nullptr, decoder(1, false),
                                nn::cross_entropy_loss);
    pm.plan->setup(*pm.model, {});
    const Tensor tokens = slice(testing::batch(true, 0, 2).first, 1, 0, 7);
    try {
      pm.model->forward(tokens);
      ADD_FAILURE() << "7 tokens accepted on 2 segments";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("does not split into parallel.tensor = 2 equal segments"), std::string::npos)
          << e.what();
    }
  });
}

}  // namespace
}  // namespace braid::parallel
