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

// The standard normal CDF, Phi(v) = 0.5 erfc(-v / sqrt(2)). For |z| < 2,
// z = v / sqrt(2): erf(z) = z P(z^2); beyond, erfc(|z|) = e^{-z^2} Q(1/|z|),
// which keeps the relative accuracy of the far tail (GELU of very negative v).
// P and Q are least-squares fits made for braid (numpy.polyfit, degree 10 on
// [0, 2] and degree 8 on [2, 10]; float evaluation errors 3e-7 absolute for
// erf and 1.5e-6 relative for erfc up to |z| = 4).
inline float normal_cdf1(float v) {
  const float z = v * 0.70710678118654752440f;
  const float u = z * z;
  float p = 2.7095739574910835e-09f;
  p = p * u - 8.360615559236243e-08f;
  p = p * u + 1.2958226993015884e-06f;
  p = p * u - 1.3904902382655925e-05f;
  p = p * u + 0.00011857519568392726f;
  p = p * u - 0.0008523232721938845f;
  p = p * u + 0.005221971228427401f;
  p = p * u - 0.026865228978080143f;
  p = p * u + 0.11283768932403718f;
  p = p * u - 0.3761263675934629f;
  p = p * u + 1.1283791667616418f;
  const float near = 0.5f + 0.5f * (p * z);
  const float a = std::abs(z);
  const float t = 1.0f / std::max(a, 2.0f);
  float q = -0.2634471856901493f;
  q = q * t + 0.895248875345279f;
  q = q * t - 1.2743367792675948f;
  q = q * t + 0.8710389026355814f;
  q = q * t - 0.09919774624017934f;
  q = q * t - 0.26787134732222273f;
  q = q * t - 0.0012810024023330972f;
  q = q * t + 0.5642553482336526f;
  q = q * t - 1.4642294765405007e-06f;
  const float half_erfc = 0.5f * q * exp1(-u);
  const float far = z < 0.0f ? half_erfc : 1.0f - half_erfc;
  return a < 2.0f ? near : far;
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

void gelu_erf_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * normal_cdf1(x[i]);
}

void gelu_erf_grad_f32(const float* g, const float* x, float* y, int64_t n) {
  constexpr float inv_sqrt_2pi = 0.39894228040143267794f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = g[i] * (normal_cdf1(v) + v * inv_sqrt_2pi * exp1(-0.5f * v * v));
  }
}

}  // namespace braid::cpu
