#include "braid/ops/define.h"

#include <cmath>

namespace braid::op {

Shape broadcast_of(std::span<const TensorMeta> in, const char* op) {
  return broadcast_shapes(in[0].shape, in[1].shape, op);
}

InferFn broadcast_infer(const char* op) {
  return [op](std::span<const TensorMeta> in, const Attrs&) {
    if (in[0].dtype != in[1].dtype) {
      fail<ValueError>("{}: dtype mismatch, {} {} and {} {}", op, name(in[0].dtype), to_string(in[0].shape),
                       name(in[1].dtype), to_string(in[1].shape));
    }
    return Metas{{broadcast_of(in, op), in[0].dtype}};
  };
}

InferFn broadcast_infer(const char* op, DType dtype) {
  return [op, dtype](std::span<const TensorMeta> in, const Attrs&) { return Metas{{broadcast_of(in, op), dtype}}; };
}

double log2_depth(double n) { return n <= 1 ? 1.0 : std::ceil(std::log2(n)); }

}  // namespace braid::op
