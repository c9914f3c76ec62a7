// Inside the ops layer: each op family's file defines its ops through a
// Definer; the registry calls them all once, on first use, in this order.
// (Explicit calls rather than static registrars: a static library drops an
// object file nothing references, and with it the ops it would register.)
#pragma once

#include <functional>

#include "braid/ops/registry.h"

namespace braid::op {

using Definer = std::function<void(OpDef)>;

void define_elementwise_ops(const Definer& define);
void define_reduce_ops(const Definer& define);
void define_shape_ops(const Definer& define);
void define_activation_ops(const Definer& define);
void define_softmax_ops(const Definer& define);
void define_loss_ops(const Definer& define);
void define_index_ops(const Definer& define);
void define_norm_ops(const Definer& define);
void define_dropout_ops(const Definer& define);
void define_matmul_ops(const Definer& define);
void define_linear_ops(const Definer& define);
void define_conv_ops(const Definer& define);
void define_pool_ops(const Definer& define);
void define_tensor_ops(const Definer& define);
void define_update_ops(const Definer& define);
void define_attention_ops(const Definer& define);
void define_transformer_ops(const Definer& define);
void define_grouped_gemm_ops(const Definer& define);

inline void define_ops(const Definer& define) {
  define_tensor_ops(define);
  define_elementwise_ops(define);
  define_reduce_ops(define);
  define_shape_ops(define);
  define_index_ops(define);
  define_softmax_ops(define);
  define_loss_ops(define);
  define_dropout_ops(define);
  define_update_ops(define);
  define_activation_ops(define);
  define_norm_ops(define);
  define_transformer_ops(define);
  define_matmul_ops(define);
  define_linear_ops(define);
  define_conv_ops(define);
  define_pool_ops(define);
  define_attention_ops(define);
  define_grouped_gemm_ops(define);
}

}  // namespace braid::op
