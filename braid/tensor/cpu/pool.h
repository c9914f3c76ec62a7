// 2-D max and average pooling kernels (NCHW), raw: no autograd, contiguous
// buffers. Planes (n * c) are split over the intra-op pool; each plane is
// [h, w] in, [oh, ow] out.
#pragma once

#include <cstdint>

namespace braid::cpu {

struct Pool2dGeometry {
  int64_t planes = 1, h = 1, w = 1;
  int64_t kh = 1, kw = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;

  int64_t oh() const { return (h + 2 * pad_h - kh) / stride_h + 1; }
  int64_t ow() const { return (w + 2 * pad_w - kw) / stride_w + 1; }
};

// y = max over each window (padding never wins; NaN propagates, as in
// PyTorch). idx receives the argmax as a flat index into its input plane
// (iy * w + ix), which is what the backward pass scatters through.
template <class T>
void max_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, int32_t* idx);
// dx = 0, then dx[plane][idx] += dy (windows may overlap).
template <class T>
void max_pool2d_backward(const Pool2dGeometry& g, const T* dy, const int32_t* idx, T* dx);

// y = window sum / divisor; divisor = kh * kw when count_include_pad (the
// PyTorch default), else the number of window cells inside the input.
template <class T>
void avg_pool2d_forward(const Pool2dGeometry& g, const T* x, T* y, bool count_include_pad);
template <class T>
void avg_pool2d_backward(const Pool2dGeometry& g, const T* dy, T* dx, bool count_include_pad);

}  // namespace braid::cpu
