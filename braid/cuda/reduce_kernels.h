// Device kernels of the reduce family: sums (sum, mean, sum_to) and the max
// along one dim with its position (max, argmax). Each output reduces the
// elements the `inner` indexer walks, starting at the x offset `outer` gives
// it; so any strided input is read in place. f16/bf16 accumulate in float,
// f32 in float, f64 in double, integers in int64.
#pragma once

#include "braid/cuda/reduce_loop.h"

namespace braid::cuda {

// How a reduction walks its input.
struct ReducePlan {
  Indexer<2> outer;  // output index -> {offset in out, offset in x}
  Indexer<1> inner;  // element of one reduction -> offset in x from the output's base
  int64_t n_out = 0;  // outputs
  int64_t r = 0;      // elements per output
  ReduceShape shape() const {
    return reduce_shape(n_out, r, inner.ndim > 0 && inner.strides[0][inner.ndim - 1] == 1);
  }
  // Device scratch bytes sum/max_along need for this plan (0 or kReduceScratchBytes).
  size_t scratch_bytes() const { return shape() == ReduceShape::two_stage ? kReduceScratchBytes : 0; }
};

// out[o] = scale * sum of x over output o's elements; integers ignore scale.
// out and x have `dtype` (f32, f64, f16, bf16, i32, i64).
void sum(DType dtype, void* out, const void* x, const ReducePlan& plan, double scale, void* scratch);

// values[o] = the max of output o's elements, indices[o] (i64) the position
// along the reduction of the first one; NaN wins, the first NaN. values and
// indices share the outer indexer's output offsets.
void max_along(DType dtype, void* values, int64_t* indices, const void* x, const ReducePlan& plan, void* scratch);

}  // namespace braid::cuda
