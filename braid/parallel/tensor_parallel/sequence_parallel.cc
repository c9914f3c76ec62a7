#include "braid/parallel/tensor_parallel/sequence_parallel.h"

#include "braid/nn/attention.h"
#include "braid/nn/norm.h"
#include "braid/ops/autocast.h"
#include "braid/ops/linear.h"
#include "braid/ops/norm.h"
#include "braid/ops/transformer.h"
#include "braid/parallel/tensor_parallel/collectives.h"

namespace braid::parallel::tensor_parallel {

namespace {

// The overlapped products are f32 host kernels of their own; autocast's
// 16-bit products and device tensors take the blocking collectives around linear.
bool fused(const Tensor& x, const Tensor& w, const TpOptions& o) {
  return o.overlap && autocast_dtype() == DType::f32 && x.dtype() == DType::f32 && w.dtype() == DType::f32 &&
         x.device().is_cpu() && w.device().is_cpu();
}

}  // namespace

Tensor column_product(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const TpOptions& o) {
  if (o.sequence_parallel) {
    return fused(x, w, o) ? gather_linear(x, w, tp, o.overlap_options) : linear(gather_sequence(x, tp), w);
  }
  return fused(x, w, o) ? copy_linear(x, w, tp, o.overlap_options) : linear(copy_to_tensor_parallel(x, tp), w);
}

Tensor row_product(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const TpOptions& o) {
  if (o.sequence_parallel) {
    return fused(x, w, o) ? linear_reduce_scatter(x, w, tp, o.overlap_options)
                          : reduce_scatter_sequence(linear(x, w), tp);
  }
  return fused(x, w, o) ? linear_allreduce(x, w, tp, o.overlap_options) : reduce_from_tensor_parallel(linear(x, w), tp);
}

bool SequenceParallelNorm::wraps(const nn::Module& m) {
  return dynamic_cast<const nn::LayerNorm*>(&m) || dynamic_cast<const nn::RMSNorm*>(&m);
}

SequenceParallelNorm::SequenceParallelNorm(std::shared_ptr<nn::Module> norm, comm::Communicator tp)
    : tp_(std::move(tp)), norm_(std::move(norm)) {
  if (const auto* ln = dynamic_cast<const nn::LayerNorm*>(norm_.get())) {
    rms_ = false, eps_ = ln->eps(), shape_ = ln->normalized_shape();
  } else if (const auto* rms = dynamic_cast<const nn::RMSNorm*>(norm_.get())) {
    rms_ = true, eps_ = rms->eps();
  } else {
    fail<ConfigError>("parallel.sequence_parallel runs layer norms and RMS norms on sequence segments; a layer with "
                      "{} parameters of another kind cannot be (set parallel.sequence_parallel = false)",
                      norm_->num_parameters());
  }
  for (const auto& [name, t] : norm_->named_parameters()) {
    if (name == "weight") weight_ = register_parameter("weight", t);
    if (name == "bias") bias_ = register_parameter("bias", t);
  }
}

Tensor SequenceParallelNorm::forward(const Tensor& x) {
  const Tensor w = weight_.defined() ? copy_to_tensor_parallel(weight_, tp_) : Tensor();
  const Tensor b = bias_.defined() ? copy_to_tensor_parallel(bias_, tp_) : Tensor();
  return rms_ ? rms_norm(x, w, eps_) : layer_norm(x, shape_, w, b, eps_);
}

}  // namespace braid::parallel::tensor_parallel
