// embedding / embedding_bag / index_select / gather: values, scatter-add
// backward with repeated indices, finite differences, PyTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/index.h"
#include "braid/ops/matmul.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::expect_gradcheck;
using testing::expect_matches_torch;
using testing::leaf;
using testing::OpCheck;
using testing::random_index;
using testing::random_tensor;
using testing::strided_copy;

TEST(Index, EmbeddingRowsAndRepeatedIndicesAccumulate) {
  Tensor w = Tensor::from_vector<double>({0, 1, 10, 11, 20, 21}, {3, 2});
  w.set_requires_grad();
  Tensor idx = Tensor::from_vector<int64_t>({2, 0, 2, 2}, {2, 2});
  Tensor y = embedding(w, idx);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{20, 21, 0, 1, 20, 21, 20, 21}));
  backward(y, Tensor::ones({2, 2, 2}, DType::f64));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{1, 1, 0, 0, 3, 3}));
  EXPECT_THROW(embedding(w, Tensor::from_vector<int64_t>({3}, {1})), IndexError);
  EXPECT_THROW(embedding(w, Tensor::from_vector<int64_t>({-1}, {1})), IndexError);
}

TEST(Index, SelectAndGatherValues) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(index_select(x, 1, Tensor::from_vector<int64_t>({2, 0}, {2})).to_vector<float>(),
            (std::vector<float>{3, 1, 6, 4}));
  EXPECT_EQ(gather(x, 1, Tensor::from_vector<int64_t>({2, 2, 0, 1}, {2, 2})).to_vector<float>(),
            (std::vector<float>{3, 3, 4, 5}));
  EXPECT_EQ(gather(x, 0, Tensor::from_vector<int64_t>({1, 0, 1}, {1, 3})).to_vector<float>(),
            (std::vector<float>{4, 2, 6}));
}

TEST(Index, Gradcheck) {
  Generator gen(1);
  Tensor w = random_tensor({5, 3}, DType::f64, gen);
  w.set_requires_grad();
  Tensor idx = random_index({4, 3}, 5, gen);
  auto r = autograd::gradcheck([idx](const auto& in) { return embedding(in[0], idx); }, {w});
  EXPECT_TRUE(r.ok) << "embedding\n" << r.report;
  Tensor x = random_tensor({3, 4, 5}, DType::f64, gen);
  x.set_requires_grad();
  Tensor sel = random_index({6}, 4, gen);
  r = autograd::gradcheck([sel](const auto& in) { return index_select(in[0], 1, sel); }, {x});
  EXPECT_TRUE(r.ok) << "index_select\n" << r.report;
  Tensor gi = random_index({3, 7, 5}, 4, gen);
  r = autograd::gradcheck([gi](const auto& in) { return gather(in[0], 1, gi); }, {x});
  EXPECT_TRUE(r.ok) << "gather\n" << r.report;
}

TEST(Index, MatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(2);
  Tensor w = random_tensor({50, 16}, DType::f32, gen);
  Tensor x = strided_copy(random_tensor({4, 6, 5}, DType::f32, gen));
  std::vector<OpCheck> checks;
  checks.push_back({"F.embedding(i, w)", {{"w", w}, {"i", random_index({8, 9}, 50, gen)}},
                    [](const auto& in) { return embedding(in[0], in[1]); }, {"w"}});
  checks.push_back({"F.embedding(i, w)", {{"w", strided_copy(w)}, {"i", random_index({300}, 50, gen)}},
                    [](const auto& in) { return embedding(in[0], in[1]); }, {"w"}});
  for (int64_t dim : {0, 1, 2}) {
    checks.push_back({fmt::format("x.index_select({}, i)", dim), {{"x", x}, {"i", random_index({7}, x.size(dim), gen)}},
                      [dim](const auto& in) { return index_select(in[0], dim, in[1]); }, {"x"}});
    Shape gs = x.shape();
    gs[dim] = 3;
    checks.push_back({fmt::format("x.gather({}, i)", dim), {{"x", x}, {"i", random_index(gs, x.size(dim), gen)}},
                      [dim](const auto& in) { return gather(in[0], dim, in[1]); }, {"x"}});
  }
  expect_matches_torch(checks);
}

// B bag offsets over n indices: 0, then sorted draws in [0, n], so some bags
// come out empty (equal neighbours) and the last may be too (== n).
Tensor random_offsets(int64_t B, int64_t n, Generator& gen) {
  std::vector<int64_t> o{0};
  for (int64_t b = 1; b < B; ++b) o.push_back(static_cast<int64_t>(gen.below(static_cast<uint64_t>(n) + 1)));
  std::sort(o.begin(), o.end());
  return Tensor::from_vector<int64_t>(o, {B});
}

TEST(Index, EmbeddingBagValuesAndGradients) {
  // Bags: [] [1, 1, 3] [0].
  const Tensor idx = Tensor::from_vector<int64_t>({1, 1, 3, 0}, {4});
  const Tensor off = Tensor::from_vector<int64_t>({0, 0, 3}, {3});
  Tensor w = leaf(Tensor::from_vector<double>({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}));
  Tensor y = embedding_bag(w, idx, off);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0, 0, 50, 53, 0, 1}));
  backward(y, Tensor::from_vector<double>({7, 7, 1, 2, 3, 4}, {3, 2}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{3, 4, 2, 4, 0, 0, 1, 2}));

  w = leaf(w.detach());
  y = embedding_bag(w, idx, off, {}, EmbeddingBagMode::mean);
  EXPECT_TRUE(all_close(y, Tensor::from_vector<double>({0, 0, 50.0 / 3, 53.0 / 3, 0, 1}, {3, 2})));
  backward(y, Tensor::from_vector<double>({7, 7, 3, 6, 3, 4}, {3, 2}));
  EXPECT_TRUE(all_close(w.grad(), Tensor::from_vector<double>({3, 4, 2, 4, 0, 0, 1, 2}, {4, 2})));

  w = leaf(w.detach());
  Tensor p = leaf(Tensor::from_vector<double>({2, -1, 0.5, 3}, {4}));
  y = embedding_bag(w, idx, off, p);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0, 0, 25, 26.5, 0, 3}));
  backward(y, Tensor::from_vector<double>({7, 7, 1, 2, 3, 4}, {3, 2}));
  EXPECT_EQ(w.grad().to_vector<double>(), (std::vector<double>{9, 12, 1, 2, 0, 0, 0.5, 1}));
  // dot(grad row of the bag, weight row): (1, 2).(10, 11) and (1, 2).(30, 31), (3, 4).(0, 1).
  EXPECT_EQ(p.grad().to_vector<double>(), (std::vector<double>{32, 32, 92, 4}));

  // No bags, no indices: [0, D].
  EXPECT_EQ(embedding_bag(w, Tensor::zeros({0}, DType::i64), Tensor::zeros({0}, DType::i64)).shape(), (Shape{0, 2}));
}

TEST(Index, EmbeddingBagRejectsBadInput) {
  const Tensor w = Tensor::zeros({4, 2}, DType::f32);
  const Tensor idx = Tensor::from_vector<int64_t>({1, 1, 3, 0}, {4});
  const Tensor off = Tensor::from_vector<int64_t>({0, 2}, {2});
  const auto i64 = [](std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); };
  EXPECT_THROW(embedding_bag(w, i64({1, 4}), off), IndexError);
  EXPECT_THROW(embedding_bag(w, i64({-1, 0}), off), IndexError);
  EXPECT_THROW(embedding_bag(w, idx, i64({1, 2})), ValueError);     // offsets[0] != 0
  EXPECT_THROW(embedding_bag(w, idx, i64({0, 3, 2})), ValueError);  // decreasing
  EXPECT_THROW(embedding_bag(w, idx, i64({0, 5})), ValueError);     // past the end
  EXPECT_THROW(embedding_bag(w, idx, i64({})), ValueError);         // indices but no bags
  EXPECT_THROW(embedding_bag(w, idx.to(DType::i32), off), ValueError);
  EXPECT_THROW(embedding_bag(w, idx, off.to(DType::i32)), ValueError);
  EXPECT_THROW(embedding_bag(w, Tensor::from_vector<int64_t>({1, 1, 3, 0}, {2, 2}), off), ValueError);
  EXPECT_THROW(embedding_bag(w.to(DType::i64), idx, off), ValueError);
  EXPECT_THROW(embedding_bag(Tensor::zeros({8}, DType::f32), idx, off), ValueError);
  EXPECT_THROW(embedding_bag(w, idx, off, Tensor::ones({3}, DType::f32)), ValueError);
  EXPECT_THROW(embedding_bag(w, idx, off, Tensor::ones({4}, DType::f64)), ValueError);
  EXPECT_THROW(embedding_bag(w, idx, off, Tensor::ones({4}, DType::f32), EmbeddingBagMode::mean), ValueError);
  try {
    embedding_bag(w, i64({1, 9, 0, 0}), off);
    FAIL() << "no IndexError";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("embedding_bag"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("9"), std::string::npos) << e.what();
  }
}

TEST(Index, EmbeddingBagGradcheck) {
  Generator gen(3);
  const Tensor w = leaf(random_tensor({6, 3}, DType::f64, gen));
  const Tensor p = leaf(random_tensor({10}, DType::f64, gen));
  const Tensor idx = random_index({10}, 6, gen);
  const Tensor off = Tensor::from_vector<int64_t>({0, 3, 3, 7, 10}, {5});  // bags 1 and 4 empty
  expect_gradcheck([=](const auto& in) { return embedding_bag(in[0], idx, off); }, {w}, "embedding_bag sum");
  expect_gradcheck([=](const auto& in) { return embedding_bag(in[0], idx, off, {}, EmbeddingBagMode::mean); }, {w},
                   "embedding_bag mean");
  expect_gradcheck([=](const auto& in) { return embedding_bag(in[0], idx, off, in[1]); }, {w, p},
                   "embedding_bag per_sample_weights");
}

TEST(Index, EmbeddingBagMatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(4);
  std::vector<OpCheck> checks;
  // Small V so indices repeat within and across bags; random offsets leave some bags empty.
  for (auto [V, D, n, B] : std::vector<std::array<int64_t, 4>>{{7, 5, 40, 12}, {30, 64, 300, 40}, {5, 3, 0, 4}}) {
    const Tensor w = random_tensor({V, D}, DType::f32, gen);
    const Tensor i = random_index({n}, V, gen);
    const Tensor o = random_offsets(B, n, gen);
    const Tensor p = random_tensor({n}, DType::f32, gen);
    checks.push_back({"F.embedding_bag(i, w, o, mode='sum')", {{"w", w}, {"i", i}, {"o", o}},
                      [](const auto& in) { return embedding_bag(in[0], in[1], in[2]); }, {"w"}});
    checks.push_back({"F.embedding_bag(i, w, o, mode='mean')", {{"w", strided_copy(w)}, {"i", i}, {"o", o}},
                      [](const auto& in) { return embedding_bag(in[0], in[1], in[2], {}, EmbeddingBagMode::mean); },
                      {"w"}});
    checks.push_back({"F.embedding_bag(i, w, o, mode='sum', per_sample_weights=p)",
                      {{"w", w}, {"i", i}, {"o", o}, {"p", p}},
                      [](const auto& in) { return embedding_bag(in[0], in[1], in[2], in[3]); }, {"w", "p"}});
  }
  expect_matches_torch(checks);
}

// Bags with per_sample_weights are CSR rows: embedding_bag(W, col, row starts,
// values) == densified rows X [B, V] times W [V, D].
TEST(Index, EmbeddingBagIsSparseTimesDense) {
  Generator gen(5);
  const int64_t V = 9, D = 4, B = 6;
  std::vector<int64_t> col, start;
  std::vector<double> val, dense(B * V, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    start.push_back(static_cast<int64_t>(col.size()));
    for (int64_t v = 0; v < V; ++v) {
      if (gen.below(3) != 0 || b == 2) continue;  // row 2 stays empty
      col.push_back(v);
      val.push_back(gen.uniform_f64() + 0.5);
      dense[b * V + v] = val.back();
    }
  }
  const int64_t n = static_cast<int64_t>(col.size());
  const Tensor w = random_tensor({V, D}, DType::f64, gen);
  const Tensor y = embedding_bag(w, Tensor::from_vector<int64_t>(col, {n}), Tensor::from_vector<int64_t>(start, {B}),
                                 Tensor::from_vector<double>(val, {n}));
  EXPECT_TRUE(all_close(y, matmul(Tensor::from_vector<double>(dense, {B, V}), w), 1e-12, 1e-12));
}

}  // namespace
}  // namespace braid
