// Device kernels of the gradient codecs (braid/comm/codec/): encode and decode
// where the bucket lives, with the host codecs' arithmetic and message layout,
// so a device message's bytes are the host encoder's bit for bit (sums of a
// chunk in double, one thread a chunk, as the host sums them in double) and
// QSGD rounds with the same Philox words. All pointers are device memory on
// this thread's GPU; messages start with the host codecs' headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "braid/cuda/loop.h"

namespace braid::cuda {

void codec_add(float* x, const float* y, int64_t n);     // x += y
void codec_scale(float* x, int64_t n, float factor);     // x *= factor
void codec_zero(float* x, int64_t n);                    // x = 0

// half = narrow(widen(narrow(grad)) / world); out = widen(half).
void codec_cast_divide(DType half, const float* grad, void* out, int64_t n, float world);
void codec_widen(DType half, const void* in, float* out, int64_t n);

// QSGD (qsgd.cc): `codes` is scratch of n u32.
void qsgd_encode(const float* grad, int64_t n, uint32_t s, int64_t chunk, uint64_t key, uint64_t stream,
                 uint32_t* codes, std::byte* message);
void qsgd_decode_add(const std::byte* message, int64_t n, uint32_t s, int64_t chunk, float* out);

// 1-bit (onebit.cc): x is grad + memory, and the new memory with keep_error.
void onebit_encode(float* x, int64_t n, int64_t chunk, bool keep_error, std::byte* message);
void onebit_decode_add(const std::byte* message, int64_t n, int64_t chunk, float* out);

// Top-k (topk.cc) by the host's radix selection: three histogram passes with
// atomic counts, then blocks of kTopkBlock values count, a single thread
// assigns each block its output range (ties in index order), and the blocks
// write their indices ascending. `scratch` holds topk_scratch_bytes(n).
inline constexpr int64_t kTopkBlock = 1024;
size_t topk_scratch_bytes(int64_t n);
void topk_encode(float* x, int64_t n, int64_t k, bool keep_error, void* scratch, std::byte* message);
void topk_decode_add(const std::byte* message, int64_t n, int64_t k, float* out);

}  // namespace braid::cuda
