// Vectorised float exp / tanh / sigmoid over contiguous arrays.
//
// glibc's expf/tanhf are scalar calls that stop vectorisation (measured on
// [64, 32, 26, 26] f32: std::exp 4.5x and std::tanh 4.6x slower than PyTorch's
// SLEEF kernels). These are branch-free polynomials (Cephes) compiled in
// vmath.cc without -ftrapping-math, which GCC 12 needs to if-convert the
// selects. f64 keeps libm (gradcheck wants its last digits).
// Accuracy: exp within 2 ulp on the normal range, subnormal results down to
// e^-103.97, +inf above ln(FLT_MAX), NaN propagates; tanh and sigmoid within
// ~4 ulp (tested against libm in f64).
#pragma once

#include <cstdint>

namespace braid::cpu {

// y[i] = f(x[i]); x and y may be the same array.
void exp_f32(const float* x, float* y, int64_t n);
void tanh_f32(const float* x, float* y, int64_t n);
void sigmoid_f32(const float* x, float* y, int64_t n);
// The tanh-approximated GELU and g times its derivative (PyTorch approximate='tanh').
void gelu_tanh_f32(const float* x, float* y, int64_t n);
void gelu_tanh_grad_f32(const float* g, const float* x, float* y, int64_t n);
// The exact GELU x Phi(x) and g times its derivative (PyTorch approximate='none').
void gelu_erf_f32(const float* x, float* y, int64_t n);
void gelu_erf_grad_f32(const float* g, const float* x, float* y, int64_t n);

}  // namespace braid::cpu
