// Shape and view ops: what the op table (cases_shape.cc) cannot express —
// which results share the input's storage, and split's pieces.
#include <gtest/gtest.h>

#include "braid/ops/registry.h"
#include "braid/ops/shape.h"

namespace braid {
namespace {

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
  EXPECT_EQ(flatten(Tensor::zeros({2, 0, 3}), 0, 1).shape(), (Shape{0, 3}));
  EXPECT_EQ(slice(x, 2, 1, 4, 2).to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  EXPECT_EQ(slice(x, -1, -2, 100).shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(slice(x, 0, 5, 1).shape(), (Shape{0, 3, 4}));
  EXPECT_EQ(squeeze(Tensor::zeros({1, 3, 1}), 0).shape(), (Shape{3, 1}));
  EXPECT_EQ(squeeze(Tensor::zeros({1, 3, 1})).shape(), (Shape{3}));
  EXPECT_TRUE(squeeze(x, 1).same(x));  // not size 1: x itself
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
  // The reshape op itself only views: the copy is the eager function's.
  EXPECT_THROW(op::call1(op::find("reshape"), {t}, {{"shape", std::vector<int64_t>{24}}}), ValueError);
}

TEST(Shape, SplitPiecesAndIntegerConcat) {
  EXPECT_EQ(split(Tensor::zeros({7}), 3).size(), 3u);
  EXPECT_EQ(split(Tensor::zeros({7}), 3)[2].shape(), (Shape{1}));
  auto parts = split(Tensor::arange(6).as_strided({2, 3}, {3, 1}, 0), std::vector<int64_t>{1, 2}, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].to_vector<float>(), (std::vector<float>{0, 3}));
  EXPECT_EQ(parts[1].to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  Tensor i = Tensor::from_vector<int64_t>({1, 2}, {2});
  EXPECT_EQ(concat({i, i}, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 1, 2}));
  EXPECT_THROW(split(Tensor::zeros({7}), 0), ValueError);
  EXPECT_THROW(stack({Tensor::zeros({2}), Tensor::zeros({3})}), ValueError);
}

}  // namespace
}  // namespace braid
