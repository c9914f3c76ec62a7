#include "braid/tensor/cpu/batch_norm.h"

#include <algorithm>
#include <cmath>

#include "braid/base/thread_pool.h"

namespace braid::cpu {
namespace {

constexpr int64_t kLanes = 8;

// sum over i < len of f(i) (a double), in kLanes partial sums: the compiler
// keeps them in vector registers.
template <class F>
double lane_sum(int64_t len, F&& f) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) acc[l] += f(i + l);
  double total = 0;
  for (; i < len; ++i) total += f(i);
  for (int64_t l = 0; l < kLanes; ++l) total += acc[l];
  return total;
}

// Channels per parallel chunk: about kGrain values each.
int64_t channel_grain(int64_t per_channel) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(per_channel, 1)); }

}  // namespace

template <class T>
void batch_norm_forward(const T* x, const T* w, const T* b, T* y, double* stats, int64_t n, int64_t c, int64_t s,
                        double eps) {
  const double count = static_cast<double>(n * s);
  parallel_for(0, c, channel_grain(n * s), [&](int64_t lo, int64_t hi) {
    for (int64_t ci = lo; ci < hi; ++ci) {
      double sum = 0;
      for (int64_t ni = 0; ni < n; ++ni) {
        const T* p = x + (ni * c + ci) * s;
        sum += lane_sum(s, [p](int64_t i) { return static_cast<double>(p[i]); });
      }
      const double mean = sum / count;
      const T m = static_cast<T>(mean);
      double sq = 0;
      for (int64_t ni = 0; ni < n; ++ni) {
        const T* p = x + (ni * c + ci) * s;
        sq += lane_sum(s, [p, mean](int64_t i) {
          const double d = static_cast<double>(p[i]) - mean;
          return d * d;
        });
      }
      const double invstd = 1.0 / std::sqrt(sq / count + eps);
      stats[ci] = mean;
      stats[c + ci] = invstd;
      // (x - mean) first: with a mean far from 0, x * k - mean * k would cancel.
      const T k = static_cast<T>((w != nullptr ? static_cast<double>(w[ci]) : 1.0) * invstd);
      const T shift = b != nullptr ? b[ci] : T{0};
      for (int64_t ni = 0; ni < n; ++ni) {
        const T* p = x + (ni * c + ci) * s;
        T* q = y + (ni * c + ci) * s;
        for (int64_t i = 0; i < s; ++i) q[i] = (p[i] - m) * k + shift;
      }
    }
  });
}

template <class T>
void batch_norm_backward(const T* g, const T* x, const T* w, const double* stats, T* gx, T* sums, int64_t n, int64_t c,
                         int64_t s) {
  const double count = static_cast<double>(n * s);
  parallel_for(0, c, channel_grain(n * s), [&](int64_t lo, int64_t hi) {
    for (int64_t ci = lo; ci < hi; ++ci) {
      const double mean = stats[ci], invstd = stats[c + ci];
      const T m = static_cast<T>(mean);
      double sum_g = 0, sum_gc = 0;  // sum(g), sum(g * (x - mean))
      for (int64_t ni = 0; ni < n; ++ni) {
        const T* gp = g + (ni * c + ci) * s;
        const T* xp = x + (ni * c + ci) * s;
        sum_g += lane_sum(s, [gp](int64_t i) { return static_cast<double>(gp[i]); });
        sum_gc += lane_sum(s, [gp, xp, mean](int64_t i) {
          return static_cast<double>(gp[i]) * (static_cast<double>(xp[i]) - mean);
        });
      }
      const double sum_gxhat = sum_gc * invstd;
      sums[ci] = static_cast<T>(sum_g);
      sums[c + ci] = static_cast<T>(sum_gxhat);
      // g_x = a * g + b * (x - mean) + d, with a = w * invstd,
      // b = -a * invstd * mean(g * xhat), d = -a * mean(g).
      const double a = (w != nullptr ? static_cast<double>(w[ci]) : 1.0) * invstd;
      const T ka = static_cast<T>(a), kb = static_cast<T>(-a * invstd * sum_gxhat / count),
              kd = static_cast<T>(-a * sum_g / count);
      for (int64_t ni = 0; ni < n; ++ni) {
        const T* gp = g + (ni * c + ci) * s;
        const T* xp = x + (ni * c + ci) * s;
        T* q = gx + (ni * c + ci) * s;
        for (int64_t i = 0; i < s; ++i) q[i] = ka * gp[i] + kb * (xp[i] - m) + kd;
      }
    }
  });
}

template void batch_norm_forward<float>(const float*, const float*, const float*, float*, double*, int64_t, int64_t,
                                        int64_t, double);
template void batch_norm_forward<double>(const double*, const double*, const double*, double*, double*, int64_t,
                                         int64_t, int64_t, double);
template void batch_norm_backward<float>(const float*, const float*, const float*, const double*, float*, float*,
                                         int64_t, int64_t, int64_t);
template void batch_norm_backward<double>(const double*, const double*, const double*, const double*, double*, double*,
                                          int64_t, int64_t, int64_t);

}  // namespace braid::cpu
