// f32 <-> bf16 conversion over contiguous arrays, vectorised and split over
// the intra-op pool: mixed precision converts every operand of every
// bf16 product, so this runs at memory speed.
//
// Rounding is exactly the scalar `bf16` type's (dtype.h): to nearest even,
// NaN stays a (quiet) NaN, subnormals are kept. With AVX512-BF16 (a native
// build on a CPU that has it) the conversion is vcvtneps2bf16, with the rare
// vectors that hold a subnormal (which it flushes to zero) converted by the
// portable integer loop; elsewhere the integer loop alone, which GCC
// vectorises.
#pragma once

#include <cstdint>

#include "braid/tensor/dtype.h"

namespace braid::cpu {

void cast_f32_to_bf16(const float* in, bf16* out, int64_t n);
void cast_bf16_to_f32(const bf16* in, float* out, int64_t n);

}  // namespace braid::cpu
