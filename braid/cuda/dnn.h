// Convolutions on the GPU as the CUDA backend's conv ops see them: the three
// products of a 2-D convolution over contiguous NCHW buffers, with no cuDNN
// types in sight. dnn.cc implements them with cuDNN; the emulated tests
// (tests/cuda/emulated_dnn.cc) with direct loops that accumulate in double.
//
// Geometry is the CPU op's (stride, padding, dilation, groups). Shapes:
// x [n, c, h, w], w [o, c / groups, kh, kw], y [n, o, oh, ow]; every buffer
// in `dtype`: f32 (plain FP32 math, no TF32), f64, or f16 (f32 accumulation).
// bf16 operands with f32 results, as the ops define them, do not fit cuDNN's
// one-dtype convolutions: the ops widen them to f32 first (exact products).
// Each call goes to the device's current stream and overwrites its output.
#pragma once

#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/dtype.h"

namespace braid::cuda::dnn {

using cpu::Conv2dGeometry;

// y = conv(x, w) (cross-correlation, as torch.nn.functional.conv2d).
void conv2d_forward(const Conv2dGeometry& g, DType dtype, const void* x, const void* w, void* y, int device);
// dx = conv_transpose(dy, w).
void conv2d_backward_data(const Conv2dGeometry& g, DType dtype, const void* dy, const void* w, void* dx, int device);
// dw = sum over images of dy (x) x.
void conv2d_backward_filter(const Conv2dGeometry& g, DType dtype, const void* dy, const void* x, void* dw,
                            int device);

}  // namespace braid::cuda::dnn
