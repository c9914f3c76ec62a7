// Device kernels: strided copies with conversion, and fills.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// dst[ix 0] = convert(src[ix 1]) for n elements.
void copy_cast(DType dst_dtype, void* dst, DType src_dtype, const void* src, const Indexer<2>& ix, int64_t n);
// dst[ix 0] = value for n elements.
void fill(DType dtype, void* dst, double value, const Indexer<1>& ix, int64_t n);

}  // namespace braid::cuda
