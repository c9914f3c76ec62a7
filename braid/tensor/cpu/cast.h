// f32 <-> bf16 conversion over contiguous arrays, vectorised and split over
// the intra-op pool: mixed precision converts every operand of every
// bf16 product, so this runs at memory speed.
//
// Rounding is exactly the scalar `bf16` type's (dtype.h): to nearest even,
// NaN stays a (quiet) NaN, subnormals are kept. That is why it is not
// AVX512-BF16's vcvtneps2bf16, which flushes subnormal inputs to zero; the
// integer form compiles to AVX-512 code that is as fast (measured on the
// development machine, a 2-core Xeon with AMX, one thread, 4 MiB of f32:
// ~4 G elements/s either way).
#pragma once

#include <cstdint>

#include "braid/tensor/dtype.h"

namespace braid::cpu {

void cast_f32_to_bf16(const float* in, bf16* out, int64_t n);
void cast_bf16_to_f32(const bf16* in, float* out, int64_t n);

}  // namespace braid::cpu
