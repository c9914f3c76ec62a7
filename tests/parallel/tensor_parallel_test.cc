// Tensor parallelism: the vocabulary-parallel cross-entropy and the gather
// against their whole counterparts, and T ranks training a sharded MLP or
// transformer against one process with the whole model.
#include <gtest/gtest.h>

#include "braid/ops/elementwise.h"
#include "braid/ops/reduce.h"
#include "braid/ops/shape.h"
#include "braid/parallel/tensor_parallel/collectives.h"
#include "braid/parallel/tensor_parallel/cross_entropy.h"
#include "braid/parallel/tensor_parallel/rewrite.h"
#include "tests/parallel/inproc_ranks.h"
#include "tests/parallel/model_parallel_util.h"

namespace braid::parallel {
namespace {

using namespace testing;

using testing::on_ranks;

Tensor random_logits(int64_t rows, int64_t classes) {
  Generator g(77);
  std::vector<float> v(static_cast<size_t>(rows * classes));
  for (float& x : v) x = static_cast<float>(3 * g.normal());
  return Tensor::from_vector(v, {rows, classes});
}

// Loss and gradient on the slices equal nn::cross_entropy_loss on the whole
// logits, for vocabularies the degree divides and does not (f32; the sums
// run in another order: 1e-5).
TEST(VocabParallelCrossEntropy, EqualsTheWholeLoss) {
  for (auto [classes, world] : {std::pair{10, 2}, std::pair{10, 3}, std::pair{7, 4}, std::pair{5, 1}}) {
    const int64_t rows = 6;
    const Tensor whole = random_logits(rows, classes);
    std::vector<int64_t> tv;
    for (int64_t r = 0; r < rows; ++r) tv.push_back((r * 3 + 1) % classes);
    const Tensor targets = Tensor::from_vector(tv, {rows});
    Tensor w = whole.clone();
    w.set_requires_grad();
    const Tensor ref = nn::cross_entropy_loss(w, targets);
    backward(ref);
    const std::vector<float> ref_grad = w.grad().to_vector<float>();
    on_ranks(world, [&](int rank, comm::Communicator tp) {
      const auto [b, e] = shard_range(classes, world, rank);
      Tensor mine = slice(whole, 1, b, e).clone();
      mine.set_requires_grad();
      const Tensor loss = tensor_parallel::vocab_parallel_cross_entropy(mine, targets, b, classes, tp);
      EXPECT_NEAR(loss.item(), ref.item(), 1e-5) << classes << " classes on " << world;
      backward(loss);
      const std::vector<float> g = mine.grad().to_vector<float>();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = b; j < e; ++j) {
          EXPECT_NEAR(g[static_cast<size_t>(r * (e - b) + (j - b))], ref_grad[static_cast<size_t>(r * classes + j)], 1e-6)
              << "row " << r << " class " << j;
        }
      }
    });
  }
}

// gather_last_dim of uneven slices is the whole tensor; its backward keeps
// each rank's slice of the gradient.
TEST(TensorParallelCollectives, GatherOfUnevenSlices) {
  const Tensor whole = random_logits(3, 7);
  on_ranks(3, [&](int rank, comm::Communicator tp) {
    std::vector<int64_t> widths;
    for (int r = 0; r < 3; ++r) widths.push_back(shard_range(7, 3, r).second - shard_range(7, 3, r).first);
    const auto [b, e] = shard_range(7, 3, rank);
    Tensor mine = slice(whole, 1, b, e).clone();
    mine.set_requires_grad();
    const Tensor all = tensor_parallel::gather_last_dim(mine, tp, widths);
    EXPECT_EQ(all.to_vector<float>(), whole.to_vector<float>());
    backward(sum(mul(all, whole)));  // d/d(mine) = whole's slice
    EXPECT_EQ(mine.grad().to_vector<float>(), slice(whole, 1, b, e).contiguous().to_vector<float>());
  });
}

struct Case {
  int degree;
  bool tokens;
};

class TensorParallelEquivalence : public ::testing::TestWithParam<Case> {};

// T ranks, each holding its shards, for 3 SGD steps equal one process with
// the whole model; every rank's slices are compared with the matching slice
// of the whole parameter (f32, partial sums added in another order: 2e-5).
TEST_P(TensorParallelEquivalence, ShardsEqualOneProcess) {
  const Case c = GetParam();
  constexpr int kSteps = 3;
  constexpr int64_t kRows = 6;
  auto build = [&] { return c.tokens ? char_transformer(3) : mlp(3); };
  const Params expected = train_single(build(), c.tokens, kSteps, kRows, 0.1);
  const auto got = train_planned(c.degree, {.strategy = "auto", .mesh = {.tensor = c.degree}}, build, c.tokens,
                                 kSteps, kRows, 0.1);
  EXPECT_FALSE(got[0].specs.empty()) << "nothing was sharded";
  for (int r = 0; r < c.degree; ++r) {
    EXPECT_EQ(got[static_cast<size_t>(r)].params.size(), expected.size());
    expect_matches_whole(got[static_cast<size_t>(r)], expected, 2e-5, "tensor rank " + std::to_string(r));
  }
}

INSTANTIATE_TEST_SUITE_P(Degrees, TensorParallelEquivalence,
                         ::testing::Values(Case{2, false}, Case{3, false}, Case{4, false}, Case{3, true}),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return fmt::format("T{}_{}", i.param.degree, i.param.tokens ? "transformer" : "mlp");
                         });

TEST(TensorParallelRewrite, HeadsThatDoNotDivideAreRefused) {
  on_ranks(2, [&](int, comm::Communicator tp) {
    Generator g(1);
    nn::Sequential m;
    m.push_back(std::make_shared<nn::TransformerBlock>(12, 3, g));
    EXPECT_THROW(tensor_parallel::shard_tensor_parallel(m, tp, nn::cross_entropy_loss), ConfigError);
  });
}

}  // namespace
}  // namespace braid::parallel
