// Context parallelism over in-process ranks: ring and Ulysses attention
// against the attention of the whole sequence (values and gradients, causal
// and not, grouped-query heads, rotary positions, C = 2, 3, 4 and chunk
// lengths that are not powers of two), the layout, and a small decoder
// trained under context x data, tensor and pipeline axes against one process.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/ops/attention.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/parallel/context_parallel/context_parallel.h"
#include "braid/parallel/context_parallel/ring_attention.h"
#include "braid/parallel/context_parallel/ulysses.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

using namespace context_parallel;
using testing::on_ranks;

Tensor random(const Shape& shape, uint64_t seed) {
  Generator g(seed);
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (double& x : v) x = g.normal();
  return Tensor::from_vector(v, shape);
}

// The whole sequence's values placed by each rank's spans: rank r's local
// [B, Tl, ...] pieces back in global order.
Tensor assemble(const std::vector<Tensor>& locals, const ContextLayout& like) {
  const int64_t length = locals[0].size(1) * like.size;
  std::vector<Tensor> chunks(static_cast<size_t>(like.chunks()));
  for (int r = 0; r < like.size; ++r) {
    ContextLayout l = like;
    l.rank = r;
    int64_t at = 0;
    int i = 0;
    for (const auto& [begin, end] : l.spans(length)) {
      chunks[static_cast<size_t>(l.chunk_of(r, i++))] = slice(locals[static_cast<size_t>(r)], 1, at, at + end - begin);
      at += end - begin;
    }
  }
  return concat(chunks, 1);
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const auto g = got.contiguous().to_vector<double>(), w = want.contiguous().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], tol) << what << " [" << i << "]";
}

struct Case {
  int c;
  bool causal, zigzag;
  int64_t heads, kv_heads;
};

// sum(out * w) on every rank's tokens: the sum over ranks is the whole
// sequence's sum, so each rank's gradients are the whole gradient's rows.
void check_against_whole(const Case& k, bool ulysses) {
  const int64_t b = 2, d = 4, chunk = 3;
  const ContextLayout layout{.size = k.c, .rank = 0, .zigzag = k.zigzag};
  const int64_t t = chunk * layout.chunks();
  const Tensor q = random({b, t, k.heads, d}, 1), kk = random({b, t, k.kv_heads, d}, 2),
               v = random({b, t, k.kv_heads, d}, 3), w = random({b, t, k.heads, d}, 4);
  Tensor qw = q.clone(), kw = kk.clone(), vw = v.clone();
  for (Tensor* x : {&qw, &kw, &vw}) x->set_requires_grad(true);
  const Tensor whole = scaled_dot_product_attention(qw, kw, vw, {.causal = k.causal});
  backward(sum(mul(whole, w)));

  std::vector<Tensor> out(k.c), dq(k.c), dk(k.c), dv(k.c);
  on_ranks(k.c, [&](int r, comm::Communicator cp) {
    ContextLayout l = layout;
    l.rank = r;
    Tensor ql = l.shard(q, 1), kl = l.shard(kk, 1), vl = l.shard(v, 1);
    for (Tensor* x : {&ql, &kl, &vl}) x->set_requires_grad(true);
    const Tensor o = ulysses ? ulysses_attention(ql, kl, vl, cp, k.causal)
                             : ring_attention(ql, kl, vl, cp, {.causal = k.causal, .zigzag = k.zigzag});
    backward(sum(mul(o, l.shard(w, 1))));
    out[r] = o.detach(), dq[r] = ql.grad(), dk[r] = kl.grad(), dv[r] = vl.grad();
  });
  const std::string what = fmt::format("{} C {} causal {} zigzag {} heads {}/{}", ulysses ? "ulysses" : "ring", k.c,
                                       k.causal, k.zigzag, k.heads, k.kv_heads);
  expect_close(assemble(out, layout), whole, 1e-12, what + " out");
  expect_close(assemble(dq, layout), qw.grad(), 1e-12, what + " dq");
  expect_close(assemble(dk, layout), kw.grad(), 1e-12, what + " dk");
  expect_close(assemble(dv, layout), vw.grad(), 1e-12, what + " dv");
}

TEST(ContextLayout, ZigZagAndContiguousSpans) {
  const ContextLayout zz{.size = 2, .rank = 0, .zigzag = true};
  EXPECT_EQ(zz.spans(8), (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {6, 8}}));
  const ContextLayout zz1{.size = 2, .rank = 1, .zigzag = true};
  EXPECT_EQ(zz1.spans(8), (std::vector<std::pair<int64_t, int64_t>>{{2, 4}, {4, 6}}));
  const ContextLayout ct{.size = 3, .rank = 2, .zigzag = false};
  EXPECT_EQ(ct.spans(9), (std::vector<std::pair<int64_t, int64_t>>{{6, 9}}));
  const Tensor x = reshape(Tensor::arange(8), {1, 8});
  EXPECT_EQ(zz1.shard(x, 1).to_vector<float>(), (std::vector<float>{2, 3, 4, 5}));
  try {
    ContextLayout{.size = 3, .rank = 0, .zigzag = true}.shard(reshape(Tensor::arange(9), {1, 9}), 1);
    ADD_FAILURE() << "9 tokens accepted for 6 chunks";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parallel.context = 3 (ring, zig-zag) cuts the sequence into 6 equal chunks"),
              std::string::npos) << e.what();
  }
}

TEST(RingAttention, EqualsWholeSequenceAttentionWithGradients) {
  for (int c : {2, 3, 4}) {
    check_against_whole({.c = c, .causal = true, .zigzag = true, .heads = 4, .kv_heads = 2}, false);
    check_against_whole({.c = c, .causal = false, .zigzag = true, .heads = 2, .kv_heads = 2}, false);
  }
  // Contiguous chunks: correct under either mask, only unbalanced under the causal one.
  check_against_whole({.c = 3, .causal = true, .zigzag = false, .heads = 2, .kv_heads = 1}, false);
  check_against_whole({.c = 2, .causal = false, .zigzag = false, .heads = 2, .kv_heads = 2}, false);
  check_against_whole({.c = 1, .causal = true, .zigzag = true, .heads = 2, .kv_heads = 1}, false);
}

TEST(UlyssesAttention, EqualsWholeSequenceAttentionWithGradients) {
  for (int c : {2, 3, 4}) {
    check_against_whole({.c = c, .causal = true, .zigzag = false, .heads = 2 * c, .kv_heads = c}, true);
    check_against_whole({.c = c, .causal = false, .zigzag = false, .heads = c, .kv_heads = c}, true);
  }
}

TEST(UlyssesAttention, RefusesHeadsTheDegreeDoesNotDivide) {
  on_ranks(2, [&](int, comm::Communicator cp) {
    const Tensor q = random({1, 4, 3, 2}, 1), k = random({1, 4, 1, 2}, 2);
    EXPECT_THROW(ulysses_attention(q, k, k, cp), ValueError);
  });
}

// Packed projections through ContextParallel::attend (what a layer's attend()
// becomes): rotary positions at the tokens' global positions.
TEST(ContextParallelAttend, RotaryPositionsAreTheTokensGlobalOnes) {
  const int64_t b = 2, heads = 4, kv = 2, d = 4;
  for (Mode mode : {Mode::ring, Mode::ulysses}) {
    for (int c : {2, 3}) {
      if (mode == Mode::ulysses && c == 3) continue;  // 4 heads, 2 kv heads
      const int64_t t = 2 * 3 * c;
      const Tensor qkv = random({b, t, (heads + 2 * kv) * d}, 7), w = random({b, t, heads * d}, 8);
      Tensor whole_in = qkv.clone();
      whole_in.set_requires_grad(true);
      const Tensor whole = nn::attend(whole_in, heads, kv, true, 10000, nullptr);
      backward(sum(mul(whole, w)));
      std::vector<Tensor> out(c), grad(c);
      ContextLayout layout;
      on_ranks(c, [&](int r, comm::Communicator cp) {
        ContextParallel ctx(cp, mode);
        if (r == 0) layout = ctx.layout();
        Tensor in = ctx.shard(qkv);
        in.set_requires_grad(true);
        nn::AttendOverride use(&ctx.attend());
        const Tensor o = nn::attend(in, heads, kv, true, 10000, nullptr);
        backward(sum(mul(o, ctx.shard(w))));
        out[r] = o.detach(), grad[r] = in.grad();
      });
      const std::string what = fmt::format("{} C {}", name(mode), c);
      expect_close(assemble(out, layout), whole, 1e-12, what + " out");
      expect_close(assemble(grad, layout), whole_in.grad(), 1e-12, what + " d qkv");
    }
  }
}

// A small LLaMA- or GPT-2-like decoder: vocab 11, 8 tokens, width 16, 4 heads.
std::shared_ptr<nn::Sequential> decoder(uint64_t seed, bool rope, int64_t kv_heads, bool tied) {
  Generator g(seed);
  auto m = std::make_shared<nn::Sequential>();
  auto embed = std::make_shared<nn::TokenPositionEmbedding>(testing::kVocab, rope ? 0 : testing::kContext, 16, g);
  m->push_back(embed);
  for (int i = 0; i < 2; ++i) {
    m->push_back(std::make_shared<nn::TransformerBlock>(
        16, 4, g, nn::AttentionOptions{.causal = true, .kv_heads = kv_heads, .rope_theta = rope ? 10000.0 : 0.0},
        nn::BlockOptions{.norm = rope ? nn::NormKind::rms : nn::NormKind::layer,
                         .mlp = rope ? nn::MlpKind::swiglu : nn::MlpKind::gelu_tanh}));
  }
  m->push_back(std::make_shared<nn::LayerNorm>(Shape{16}));
  if (tied) {
    m->push_back(std::make_shared<nn::TiedHead>(embed->tok()));
  } else {
    m->push_back(std::make_shared<nn::Linear>(16, testing::kVocab, g, nn::LinearOptions{.bias = false}));
  }
  return m;
}

// Three SGD steps under each mesh equal one process's, parameter by parameter.
TEST(ContextParallelPlan, TrainsLikeOneProcessUnderEveryAxis) {
  struct Setup {
    std::string name;
    PlanOptions options;
    int world;
    bool rope, tied;
    int64_t kv_heads;
  };
  const std::vector<Setup> setups{
      {"CP 2 ring, rope, GQA, tied", {.mesh = {.context = 2}}, 2, true, true, 2},
      {"CP 2 ulysses, rope, GQA", {.mesh = {.context = 2}, .context_mode = "ulysses"}, 2, true, false, 2},
      {"CP 4 ring, learned positions, tied", {.mesh = {.context = 4}}, 4, false, true, 4},
      {"DP 2 x CP 2 ring", {.mesh = {.data = 2, .context = 2}}, 4, true, false, 2},
      {"TP 2 x CP 2 ring, learned, tied", {.mesh = {.tensor = 2, .context = 2}}, 4, false, true, 4},
      {"TP 2 x CP 2 ulysses", {.mesh = {.tensor = 2, .context = 2}, .context_mode = "ulysses"}, 4, true, false, 4},
      {"PP 2 x CP 2 ring", {.mesh = {.pipeline = 2, .context = 2}, .microbatches = 2}, 4, false, false, 4},
  };
  for (const Setup& s : setups) {
    SCOPED_TRACE(s.name);
    const auto whole = testing::train_single(decoder(5, s.rope, s.kv_heads, s.tied), true, 3, 4, 0.2);
    const auto got = testing::train_planned(s.world, s.options, [&] { return decoder(5, s.rope, s.kv_heads, s.tied); },
                                            true, 3, 4, 0.2);
    for (int r = 0; r < s.world; ++r) testing::expect_matches_whole(got[r], whole, 2e-5, fmt::format("rank {}", r));
  }
}

// The plan's evaluation gathers the whole sequence's output on every rank.
TEST(ContextParallelPlan, EvaluatesTheWholeSequence) {
  const auto whole_model = decoder(9, true, 2, true);
  const auto [x, t] = testing::batch(true, 0, 3);
  const Tensor want = whole_model->forward(x);
  on_ranks(2, [&](int, comm::Communicator comm) {
    PlannedModel pm = make_plan({.mesh = {.context = 2}}, comm, nullptr, decoder(9, true, 2, true),
                                nn::cross_entropy_loss);
    pm.plan->setup(*pm.model, {});
    EXPECT_TRUE(pm.plan->evaluation_is_collective());
    autograd::NoGradGuard no_grad;
    pm.model->eval();
    expect_close(pm.plan->evaluate(*pm.model, x), want, 2e-5, "logits");
  });
}

TEST(ContextParallelPlan, RefusesWhatItCannotSplit) {
  auto refused = [](PlanOptions o, int world, std::shared_ptr<nn::Sequential> model, const std::string& expected) {
    on_ranks(world, [&](int, comm::Communicator comm) {
      try {
        make_plan(o, comm, nullptr, model, nn::cross_entropy_loss);
        ADD_FAILURE() << "accepted: " << expected;
      } catch (const ConfigError& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      }
    });
  };
  refused({.strategy = "local_sgd", .mesh = {.context = 2}}, 2, decoder(1, true, 2, false),
          "parallel.strategy must be auto, allreduce or zero (got local_sgd)");
  refused({.mesh = {.context = 2}, .context_mode = "ulysses"}, 2, decoder(1, true, 1, false),
          "4 heads and 1 key/value heads (model.n_heads = 4, model.kv_heads = 1)");
  refused({.mesh = {.context = 2}}, 2, testing::mlp(1), "layer 1 is none of them");
  refused({.mesh = {.context = 2}, .context_mode = "spiral"}, 2, decoder(1, true, 2, false),
          "parallel.context_mode = spiral (known: ring, ulysses)");
}

}  // namespace
}  // namespace braid::parallel
