// Shape and view ops: storage sharing, values, gradients, PyTorch.
#include <gtest/gtest.h>

#include "braid/autograd/engine.h"
#include "braid/autograd/gradcheck.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/shape.h"
#include "gradcheck_util.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::expect_matches_torch;
using testing::OpCheck;
using testing::random_tensor;
using testing::strided_copy;
using testing::Fn;
using testing::leaf;
using testing::expect_gradcheck;

TEST(Shape, ViewsShareStorage) {
  Tensor x = Tensor::arange(24).as_strided({2, 3, 4}, {12, 4, 1}, 0);
  const auto* storage = x.storage().get();
  for (const Tensor& v : {reshape(x, {6, -1}), flatten(x), transpose(x, 0, 2), permute(x, {1, 2, 0}),
                          slice(x, 2, 1, 4, 2), expand(slice(x, 1, 0, 1), {2, 5, 4}), unsqueeze(x, 1),
                          squeeze(unsqueeze(x, 0)), split(x, 2, 2)[1]}) {
    EXPECT_EQ(v.storage().get(), storage);
  }
  EXPECT_EQ(reshape(x, {6, -1}).shape(), (Shape{6, 4}));
  EXPECT_EQ(flatten(x, 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(slice(x, 2, 1, 4, 2).to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(slice(x, -1, -2, 100).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(slice(x, 0, 5, 1).shape(), (Shape{0, 3, 4}));
  EXPECT_EQ(squeeze(Tensor::zeros({1, 3, 1}), 0).shape(), (Shape{3, 1}));
  EXPECT_EQ(squeeze(Tensor::zeros({1, 3, 1})).shape(), (Shape{3}));
  EXPECT_EQ(unsqueeze(x, -1).shape(), (Shape{2, 3, 4, 1}));
  // Non-contiguous: a view when the strides allow it, else a copy.
  Tensor sl = slice(x, 2, 0, 4, 2);  // [2, 3, 2], strides [12, 4, 2]
  EXPECT_EQ(reshape(sl, {6, 2}).storage().get(), storage);
  EXPECT_EQ(reshape(sl, {6, 2}).to_vector<float>(), sl.to_vector<float>());
  EXPECT_EQ(reshape(sl, {2, 3, 1, 2}).storage().get(), storage);
  EXPECT_EQ(reshape(permute(x, {1, 0, 2}), {3, 2, 2, 2}).storage().get(), storage);  // splits the last dim only
  EXPECT_EQ(reshape(permute(x, {1, 0, 2}), {3, 2, 2, 2}).to_vector<float>(),
            contiguous(permute(x, {1, 0, 2})).to_vector<float>());
  Tensor t = transpose(x, 0, 1);
  EXPECT_NE(reshape(t, {-1}).storage().get(), storage);
  EXPECT_EQ(reshape(t, {-1}).to_vector<float>()[1], 1);
  EXPECT_EQ(reshape(t, {-1}).to_vector<float>()[4], 12);
  EXPECT_TRUE(contiguous(x).same(x));
  EXPECT_TRUE(contiguous(t).is_contiguous());
}

TEST(Shape, ConcatSplitStack) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor b = Tensor::from_vector<float>({5, 6}, {2, 1});
  EXPECT_EQ(concat({a, b}, 1).to_vector<float>(), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  auto parts = split(concat({a, b}, 1), std::vector<int64_t>{1, 2}, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].to_vector<float>(), (std::vector<float>{1, 3}));
  EXPECT_EQ(parts[1].to_vector<float>(), (std::vector<float>{2, 5, 4, 6}));
  EXPECT_EQ(split(Tensor::zeros({7}), 3).size(), 3u);
  EXPECT_EQ(split(Tensor::zeros({7}), 3)[2].shape(), (Shape{1}));
  Tensor s = stack({a, a * 10.0}, 1);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(s.to_vector<float>(), (std::vector<float>{1, 2, 10, 20, 3, 4, 30, 40}));
  Tensor i = Tensor::from_vector<int64_t>({1, 2}, {2});
  EXPECT_EQ(concat({i, i}, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 1, 2}));
}

TEST(Shape, Gradcheck) {
  Generator gen(1);
  Tensor x = leaf(random_tensor({2, 3, 4}, DType::f64, gen));
  Tensor s = leaf(strided_copy(random_tensor({3, 4}, DType::f64, gen)));
  Tensor y = leaf(random_tensor({2, 2, 4}, DType::f64, gen));
  expect_gradcheck([](const auto& in) { return reshape(in[0], {4, -1}); }, {x}, "reshape");
  expect_gradcheck([](const auto& in) { return reshape(in[0], {12}); }, {s}, "reshape strided");
  expect_gradcheck([](const auto& in) { return reshape(slice(in[0], 2, 0, 4, 2), {-1, 2}); }, {x}, "reshape view of a slice");
  expect_gradcheck([](const auto& in) { return flatten(in[0], 1); }, {x}, "flatten");
  expect_gradcheck([](const auto& in) { return transpose(in[0], 0, 2); }, {x}, "transpose");
  expect_gradcheck([](const auto& in) { return permute(in[0], {2, 0, 1}); }, {x}, "permute");
  expect_gradcheck([](const auto& in) { return slice(in[0], 2, 1, 4, 2); }, {x}, "slice");
  expect_gradcheck([](const auto& in) { return expand(in[0], {5, 3, 4}); }, {s}, "expand");
  expect_gradcheck([](const auto& in) { return squeeze(unsqueeze(in[0], 1)); }, {x}, "un/squeeze");
  expect_gradcheck([](const auto& in) { return concat({in[0], in[1]}, 1); }, {x, y}, "concat");
  expect_gradcheck([](const auto& in) { return stack({in[0], in[0] * 2.0}, 0); }, {s}, "stack");
  expect_gradcheck([](const auto& in) { return split(in[0], 3, 2)[1]; }, {x}, "split");
  expect_gradcheck([](const auto& in) { return contiguous(in[0]); }, {s}, "contiguous");
}

TEST(Shape, MatchesTorch) {
  BRAID_REQUIRE_TORCH();
  Generator gen(2);
  Tensor x = random_tensor({3, 4, 5}, DType::f32, gen);
  Tensor s = strided_copy(random_tensor({4, 6, 5}, DType::f32, gen));
  Tensor r = random_tensor({3, 1, 5}, DType::f32, gen);
  std::vector<OpCheck> checks;
  for (const Tensor& t : {x, s}) {
    const std::vector<std::pair<std::string, Fn>> ops = {
        {"x.reshape(-1, 5)", [](const auto& in) { return reshape(in[0], {-1, 5}); }},
        {"x.flatten(1)", [](const auto& in) { return flatten(in[0], 1); }},
        {"x.transpose(0, 2)", [](const auto& in) { return transpose(in[0], 0, 2); }},
        {"x.permute(1, 2, 0)", [](const auto& in) { return permute(in[0], {1, 2, 0}); }},
        {"x[:, 1:4:2]", [](const auto& in) { return slice(in[0], 1, 1, 4, 2); }},
        {"x[..., -3:]", [](const auto& in) { return slice(in[0], -1, -3, 1000); }},
        {"x.unsqueeze(1).expand(-1, 2, -1, -1)", [](const auto& in) { return expand(unsqueeze(in[0], 1), {-1, 2, -1, -1}); }},
        {"torch.cat([x, x * 2], 1)", [](const auto& in) { return concat({in[0], in[0] * 2.0}, 1); }},
        {"torch.stack([x, x + 1], -1)", [](const auto& in) { return stack({in[0], in[0] + 1.0}, -1); }},
        {"x.split(2, 1)[1]", [](const auto& in) { return split(in[0], 2, 1)[1]; }},
    };
    for (const auto& [expr, fn] : ops) checks.push_back({expr, {{"x", t}}, fn, {"x"}});
  }
  checks.push_back({"torch.cat([x, r], 1)", {{"x", x}, {"r", r}},
                    [](const auto& in) { return concat({in[0], in[1]}, 1); }, {"x", "r"}});
  checks.push_back({"r.expand(2, 3, 4, 5)", {{"r", r}}, [](const auto& in) { return expand(in[0], {2, 3, 4, 5}); }, {"r"}});
  expect_matches_torch(checks);
}

}  // namespace
}  // namespace braid
