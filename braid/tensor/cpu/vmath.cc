// Compiled without -ftrapping-math: GCC 12 will not if-convert a select one of
// whose arms computes a float (it might trap), so the loops below stayed
// scalar. braid never reads the FP exception flags, so nothing observable
// changes.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include "braid/tensor/cpu/vmath.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace braid::cpu {

namespace {

inline float exp1(float x) {
  // e^x = 2^n e^r, n = round(x / ln 2) (the 1.5 * 2^23 trick rounds without a
  // libm call), |r| <= ln2 / 2 with ln 2 split in two so r is exact; e^r by
  // Cephes' degree-6 polynomial; 2^n as 2^n1 * 2^n2 so both factors stay
  // normal at the ends of the range (2^128 * p < FLT_MAX, subnormal results).
  const float c = std::min(std::max(x, -103.97f), 88.7228f);
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = c - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int32_t ni = static_cast<int32_t>(n);
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  float y = p * std::bit_cast<float>((n1 + 127) << 23) * std::bit_cast<float>((n2 + 127) << 23);
  y = x > 88.7228394f ? std::numeric_limits<float>::infinity() : y;
  y = x < -103.97f ? 0.0f : y;
  return x != x ? x : y;
}

inline float tanh1(float x) {
  // |x| < 0.625: Cephes' odd polynomial (no cancellation near 0);
  // else 1 - 2 / (e^{2|x|} + 1) with x's sign.
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float a = std::abs(x);
  const float big = std::copysign(1.0f - 2.0f / (exp1(2.0f * a) + 1.0f), x);
  return a < 0.625f ? small : big;
}

}  // namespace

void exp_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp1(x[i]);
}

void tanh_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh1(x[i]);
}

void sigmoid_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + exp1(-x[i]));
}

void gelu_tanh_f32(const float* x, float* y, int64_t n) {
  constexpr float k = 0.79788456080286535588f, c = 0.044715f;  // sqrt(2/pi)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanh1(k * (v + c * v * v * v)));
  }
}

void gelu_tanh_grad_f32(const float* g, const float* x, float* y, int64_t n) {
  constexpr float k = 0.79788456080286535588f, c = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanh1(k * (v + c * v * v * v));
    y[i] = g[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * k * (1.0f + 3.0f * c * v * v));
  }
}

}  // namespace braid::cpu
