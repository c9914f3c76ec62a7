#include "braid/parallel/tensor_parallel/cross_entropy.h"

#include <cmath>

#include "braid/autograd/node.h"
#include "braid/parallel/tensor_parallel/collectives.h"

namespace braid::parallel::tensor_parallel {

Tensor vocab_parallel_cross_entropy(const Tensor& logits, const Tensor& targets, int64_t begin, int64_t classes,
                                    const comm::Communicator& tp) {
  if (logits.dtype() != DType::f32) fail<ValueError>("vocab-parallel cross-entropy: logits must be f32");
  const int64_t width = logits.size(-1), rows = logits.numel() / std::max<int64_t>(1, width);
  if (targets.numel() != rows) {
    fail<ValueError>("vocab-parallel cross-entropy: logits {} do not match targets {}", to_string(logits.shape()),
                     to_string(targets.shape()));
  }
  const Tensor z = logits.detach().contiguous();
  const Tensor t = targets.to(DType::i64).contiguous();
  const float* zp = z.data<float>();
  const int64_t* tp_ = t.data<int64_t>();
  // Row maxima over all ranks' classes.
  Tensor max = Tensor::empty({rows}, DType::f32);
  float* mp = max.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int64_t j = 0; j < width; ++j) m = std::max(m, zp[r * width + j]);
    mp[r] = m;
  }
  allreduce_inplace(max, tp, comm::Op::max, "cross-entropy max");
  // exp(z - m) here, their row sums and the target's shifted logit over all ranks.
  Tensor e = Tensor::empty(z.shape(), DType::f32);
  Tensor sums = Tensor::zeros({2, rows}, DType::f32);  // row 0: sum of exp; row 1: target logit - m
  float* ep = e.data<float>();
  float* sp = sums.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t y = tp_[r];
    if (y < 0 || y >= classes) fail<IndexError>("vocab-parallel cross-entropy: target {} outside [0, {})", y, classes);
    double s = 0;
    for (int64_t j = 0; j < width; ++j) {
      ep[r * width + j] = std::exp(zp[r * width + j] - mp[r]);
      s += ep[r * width + j];
    }
    sp[r] = static_cast<float>(s);
    if (y >= begin && y < begin + width) sp[rows + r] = zp[r * width + (y - begin)] - mp[r];
  }
  allreduce_inplace(sums, tp, comm::Op::sum, "cross-entropy sums");
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) total += std::log(static_cast<double>(sp[r])) - sp[rows + r];
  Tensor loss = Tensor::scalar(total / static_cast<double>(rows));
  autograd::record("vocab_parallel_cross_entropy", {logits}, loss,
                   [e, sums, t, begin, width, rows](const Tensor& g) {
                     // d loss / d z_j = (softmax_j - [j == target]) * g / rows
                     const double scale = g.item() / static_cast<double>(rows);
                     Tensor dz = Tensor::empty(e.shape(), DType::f32);
                     const float* ep = e.data<float>();
                     const float* sp = sums.data<float>();
                     const int64_t* yp = t.data<int64_t>();
                     float* dp = dz.data<float>();
                     for (int64_t r = 0; r < rows; ++r) {
                       const float inv = 1.0f / sp[r];
                       for (int64_t j = 0; j < width; ++j) {
                         dp[r * width + j] = static_cast<float>((ep[r * width + j] * inv - (begin + j == yp[r])) * scale);
                       }
                     }
                     return std::vector<Tensor>{dz};
                   });
  return loss;
}

}  // namespace braid::parallel::tensor_parallel
