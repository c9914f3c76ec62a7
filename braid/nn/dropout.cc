#include "braid/nn/dropout.h"

#include "braid/nn/init.h"
#include "braid/ops/dropout.h"
#include "braid/ops/index.h"

namespace braid::nn {

Dropout::Dropout(double p, Generator* gen) : p_(p), gen_(gen) {
  if (!(p >= 0 && p < 1)) fail<ValueError>("Dropout: p must lie in [0, 1), got {}", p);
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0) return x;
  return dropout(x, {.p = p_, .training = true, .generator = gen_});
}

Embedding::Embedding(int64_t num, int64_t dim, Generator& gen) {
  if (num <= 0 || dim <= 0) fail<ValueError>("Embedding: sizes must be > 0, got {} x {}", num, dim);
  weight_ = register_parameter("weight", Tensor::empty({num, dim}));
  init::normal_(weight_, 0, 1, gen);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight_, indices); }

}  // namespace braid::nn
