// embedding / index_select / gather: values, scatter-add backward with
// repeated indices, finite differences, PyTorch.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/index.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::expect_matches_torch;
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

}  // namespace
}  // namespace braid
