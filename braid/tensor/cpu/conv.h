// 2-D convolution kernels (NCHW), raw: no autograd, contiguous buffers.
//
// Two implementations of the same three products, kept side by side and
// tested against each other:
//   im2col + GEMM (conv_im2col.cc): f32 and f64; images split over the pool,
//     one single-threaded GEMM per image and group.
//   oneDNN convolution primitives (conv_onednn.cc): f32, and bf16 products
//     with f32 results; primitives are built once per shape and thread count
//     and cached. Two flavours:
//     onednn_plain feeds braid's NCHW buffers straight in (oneDNN then runs
//     its gemm-based kernel), onednn_blocked lets oneDNN choose blocked
//     layouts for its direct jit kernels and reorders in and out per call.
//   Winograd F(2x2, 3x3) (conv_winograd.cc): f32 3x3 filters with stride 1,
//     no dilation and one group (ResNets' convolutions): 16 GEMMs over
//     transformed tiles, 2.25x fewer multiply-adds; a geometry it does not
//     cover runs im2col.
// `automatic` (f32) autotunes online per geometry, pass and thread count:
// the first calls of a shape time each implementation (on the pool's threads
// and, when the pool has several, on one thread) on the real data, and the
// fastest minimum wins from then on. (Measured here on the Fashion-MNIST
// CNN, 1 thread: im2col wins conv 1->32 forward and backward-data by 1.5-4x,
// oneDNN's blocked kernels win conv 32->64 forward and backward-data by
// ~10-20 %, no single choice wins every pass; see docs/ops.md.)
//
// bf16 products (mixed precision, docs/precision.md) autotune the same way
// over oneDNN's bf16 kernels in both flavours and the f32 implementations run
// on the operands widened to f32, which compute the same products exactly.
// (Measured on the development machine, a Xeon with AMX, one thread, batch
// 64: oneDNN's blocked bf16 kernels use AMX and beat its f32 ones on conv
// 32->64 by 6.7x forward, 5.7x backward-data and 1.7x backward-weights, before
// the layout reorders AMX needs (NHWC); on conv 1->32, with one input
// channel, AMX does not apply and the f32 kernels win.)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "braid/tensor/dtype.h"

namespace braid::cpu {

enum class ConvBackend : uint8_t { automatic, im2col, onednn_plain, onednn_blocked, winograd };

std::string_view name(ConvBackend b);

// Shapes: x [n, c, h, w], w [o, c / groups, kh, kw], y [n, o, oh, ow].
struct Conv2dGeometry {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t o = 1, kh = 1, kw = 1;       // filters
  int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  int64_t groups = 1;

  int64_t oh() const { return (h + 2 * pad_h - dil_h * (kh - 1) - 1) / stride_h + 1; }
  int64_t ow() const { return (w + 2 * pad_w - dil_w * (kw - 1) - 1) / stride_w + 1; }
  std::string to_string() const;
};

// y = conv(x, w) + b (b may be null).
template <class T>
void conv2d_forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y,
                    ConvBackend backend = ConvBackend::automatic);
// dx = conv_transpose(dy, w); overwrites dx.
template <class T>
void conv2d_backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx,
                          ConvBackend backend = ConvBackend::automatic);
// dw = sum over images of dy (x) x; db = sum of dy over n, oh, ow (db may be
// null). Overwrites dw and db.
template <class T>
void conv2d_backward_weights(const Conv2dGeometry& g, const T* dy, const T* x, T* dw, T* db,
                             ConvBackend backend = ConvBackend::automatic);

// bf16 inputs, f32 results, f32 accumulation; b, db are f32. A named
// `backend`: im2col runs on the widened operands, the oneDNN flavours run
// oneDNN's bf16 kernels; automatic tries those and oneDNN's f32 kernels on
// widened operands.
void conv2d_forward(const Conv2dGeometry& g, const bf16* x, const bf16* w, const float* b, float* y,
                    ConvBackend backend = ConvBackend::automatic);
void conv2d_backward_data(const Conv2dGeometry& g, const bf16* dy, const bf16* w, float* dx,
                          ConvBackend backend = ConvBackend::automatic);
void conv2d_backward_weights(const Conv2dGeometry& g, const bf16* dy, const bf16* x, float* dw, float* db,
                             ConvBackend backend = ConvBackend::automatic);

enum class ConvPass : uint8_t { forward, backward_data, backward_weights };

// What the autotuner settled on for a geometry, pass and product precision
// (f32 or bf16) at the current thread count, or automatic while it is still
// measuring. (f64: always im2col.)
ConvBackend conv_choice(const Conv2dGeometry& g, ConvPass pass, DType dtype = DType::f32);
// Makes every `automatic` call use `b` (automatic = autotune again); process-wide.
void set_default_conv_backend(ConvBackend b);

namespace im2col {
template <class T>
void forward(const Conv2dGeometry& g, const T* x, const T* w, const T* b, T* y);
template <class T>
void backward_data(const Conv2dGeometry& g, const T* dy, const T* w, T* dx);
template <class T>
void backward_weights(const Conv2dGeometry& g, const T* dy, const T* x, T* dw, T* db);
}  // namespace im2col

namespace winograd {
// 3x3, stride 1, dilation 1, one group, padding 0-2 on each side.
bool applies(const Conv2dGeometry& g);
void forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b, float* y);
void backward_data(const Conv2dGeometry& g, const float* dy, const float* w, float* dx);
void backward_weights(const Conv2dGeometry& g, const float* dy, const float* x, float* dw, float* db);
}  // namespace winograd

namespace onednn {
void forward(const Conv2dGeometry& g, bool blocked, const float* x, const float* w, const float* b,
             float* y);
void forward(const Conv2dGeometry& g, bool blocked, const bf16* x, const bf16* w, const float* b, float* y);
void backward_data(const Conv2dGeometry& g, bool blocked, const float* dy, const float* w, float* dx);
void backward_data(const Conv2dGeometry& g, bool blocked, const bf16* dy, const bf16* w, float* dx);
void backward_weights(const Conv2dGeometry& g, bool blocked, const float* dy, const float* x,
                      float* dw, float* db);
void backward_weights(const Conv2dGeometry& g, bool blocked, const bf16* dy, const bf16* x, float* dw,
                      float* db);
}  // namespace onednn

}  // namespace braid::cpu
