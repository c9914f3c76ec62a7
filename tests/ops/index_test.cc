// embedding / embedding_bag / index_select / gather: what the op table
// (cases_index.cc) cannot express — out-of-range indices and bad bags are
// refused, no bags at all, and bags as a sparse-times-dense product.
#include <gtest/gtest.h>

#include "braid/ops/index.h"
#include "braid/ops/matmul.h"
#include "torch_oracle.h"

namespace braid {
namespace {

using testing::all_close;
using testing::random_tensor;

TEST(Index, OutOfRangeIndicesAreRefused) {
  const Tensor w = Tensor::zeros({3, 2}, DType::f64);
  EXPECT_THROW(embedding(w, Tensor::from_vector<int64_t>({3}, {1})), IndexError);
  EXPECT_THROW(embedding(w, Tensor::from_vector<int64_t>({-1}, {1})), IndexError);
  EXPECT_THROW(index_select(w, 1, Tensor::from_vector<int64_t>({2}, {1})), IndexError);
  EXPECT_THROW(gather(w, 0, Tensor::from_vector<int64_t>({0, 3}, {1, 2})), IndexError);
  EXPECT_THROW(gather_backward(w, 0, Tensor::from_vector<int64_t>({0, 1, 3, 0, 0, 0}, {3, 2}), {3, 2}), IndexError);
  EXPECT_THROW(index_select_backward(w, 0, Tensor::from_vector<int64_t>({0, 1, 3}, {3}), {3, 2}), IndexError);
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
  // No bags, no indices: [0, D].
  EXPECT_EQ(embedding_bag(w, Tensor::zeros({0}, DType::i64), Tensor::zeros({0}, DType::i64)).shape(), (Shape{0, 2}));
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
