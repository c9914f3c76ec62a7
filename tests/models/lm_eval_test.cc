// models::evaluate_lm: the windows it cuts (each id after the first predicted
// once, the last window shorter, batches of equal windows) against the mean
// cross-entropy of each window's own forward.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/models/gpt.h"
#include "braid/models/lm_eval.h"
#include "braid/nn/loss.h"
#include "braid/ops/shape.h"
#include "tests/testing/error_message.h"

namespace braid::models {
namespace {

TEST(LmEval, MeanLossOverWindowsThatPredictEachIdOnce) {
  const GptConfig c{.vocab = 29, .context = 8, .layers = 1, .heads = 2, .dim = 16, .init_std = 0.3};
  Generator gen(1);
  auto model = gpt(c, gen);
  std::vector<int64_t> ids(23);
  for (auto& id : ids) id = static_cast<int64_t>(gen.below(29));
  // Windows of 8 inputs: ids [0, 9), [8, 17), [16, 23): 8 + 8 + 6 = 22 predictions.
  double total = 0;
  model->eval();
  for (int64_t s = 0; s < 22; s += 8) {
    const int64_t len = std::min<int64_t>(8, 22 - s);
    Tensor x = Tensor::empty({1, len}, DType::i64), y = Tensor::empty({1, len}, DType::i64);
    std::copy_n(ids.begin() + s, len, x.data<int64_t>());
    std::copy_n(ids.begin() + s + 1, len, y.data<int64_t>());
    total += nn::cross_entropy_loss(model->forward(x), y).item() * static_cast<double>(len);
  }
  for (int64_t batch : {1, 2, 8}) {
    const LmEval r = evaluate_lm(*model, ids, {.context = 8, .batch = batch});
    EXPECT_EQ(r.tokens, 22);
    EXPECT_EQ(r.windows, 3);
    EXPECT_NEAR(r.loss, total / 22, 1e-5) << "batch " << batch;
    EXPECT_NEAR(r.perplexity, std::exp(total / 22), 1e-4);
  }
  ids[17] = 29;
  EXPECT_NE(test::message_of<ValueError>([&] { evaluate_lm(*model, ids, {.context = 8}); })
                .find("id 29 at offset 17 is outside the model's vocabulary of 29"),
            std::string::npos);
  EXPECT_THROW(evaluate_lm(*model, std::vector<int64_t>{1}, {.context = 8}), ValueError);
}

}  // namespace
}  // namespace braid::models
