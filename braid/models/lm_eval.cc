#include "braid/models/lm_eval.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
#include "braid/base/error.h"
#include "braid/nn/attention.h"
#include "braid/tensor/cpu/vmath.h"

namespace braid::models {

LmEval evaluate_lm(nn::Sequential& model, std::span<const int64_t> ids, const LmEvalOptions& o) {
  if (o.context <= 0 || o.batch <= 0) {
    fail<ValueError>("evaluate_lm: context ({}) and batch ({}) must be positive", o.context, o.batch);
  }
  if (ids.size() < 2) fail<ValueError>("evaluate_lm: {} ids predict nothing (at least 2 are needed)", ids.size());
  auto* embed = model.size() > 0 ? dynamic_cast<nn::TokenPositionEmbedding*>(&model[0]) : nullptr;
  if (!embed) fail<ValueError>("evaluate_lm: the model is not a gpt (its first layer is no token embedding)");
  const int64_t vocab = embed->tok()->weight().size(0);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      fail<ValueError>("evaluate_lm: id {} at offset {} is outside the model's vocabulary of {}", ids[i], i, vocab);
    }
  }
  const bool was_training = model.is_training();
  model.eval();
  autograd::NoGradGuard no_grad;
  const Device device = model.device();
  const int64_t n = static_cast<int64_t>(ids.size());
  // Window w predicts ids (w * context, min(n - 1, (w + 1) * context)].
  const int64_t windows = (n - 1 + o.context - 1) / o.context;
  double nll = 0;
  LmEval r;
  for (int64_t w = 0; w < windows;) {
    const int64_t len = std::min(o.context, n - 1 - w * o.context);  // inputs of window w
    // Full windows go in batches; the short last one alone. A batch's logits
    // stay under 64 Mi floats (GPT-2's 1024 x 50257 are 206 MB a window).
    const int64_t most = std::clamp<int64_t>((int64_t{1} << 26) / (len * vocab), 1, o.batch);
    int64_t b = 1;
    while (b < most && w + b < windows && std::min(o.context, n - 1 - (w + b) * o.context) == len) ++b;
    Tensor x = Tensor::empty({b, len}, DType::i64);
    for (int64_t i = 0; i < b; ++i) std::copy_n(ids.data() + (w + i) * o.context, len, x.data<int64_t>() + i * len);
    const Tensor logits = model.forward(x.to(device)).to(Device::cpu).to(DType::f32).contiguous();  // [b, len, V]
    const float* l = logits.data<float>();
    // -log softmax(row)[target] per row, rows over the threads (the
    // vectorised exp; sums in f64), then summed in row order, so the figure
    // does not depend on the thread count.
    const int64_t rows = b * len;
    std::vector<double> row_nll(static_cast<size_t>(rows));
    parallel_for(0, rows, 1, [&](int64_t lo, int64_t hi) {
      std::vector<float> shifted(static_cast<size_t>(vocab));
      for (int64_t r = lo; r < hi; ++r) {
        const float* row = l + r * vocab;
        const float top = *std::max_element(row, row + vocab);
        for (int64_t v = 0; v < vocab; ++v) shifted[static_cast<size_t>(v)] = row[v] - top;
        cpu::exp_f32(shifted.data(), shifted.data(), vocab);
        double sum = 0;
        for (int64_t v = 0; v < vocab; ++v) sum += static_cast<double>(shifted[static_cast<size_t>(v)]);
        const int64_t i = r / len, t = r % len;
        row_nll[static_cast<size_t>(r)] =
            static_cast<double>(top) + std::log(sum) - static_cast<double>(row[ids[(w + i) * o.context + t + 1]]);
      }
    });
    for (const double v : row_nll) nll += v;
    r.tokens += b * len;
    w += b;
  }
  model.train(was_training);
  r.windows = windows;
  r.loss = nll / static_cast<double>(r.tokens);
  r.perplexity = std::exp(r.loss);
  return r;
}

}  // namespace braid::models
