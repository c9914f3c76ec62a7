// Batch normalisation's fused CPU kernels (training mode), raw: no autograd,
// contiguous [n, c, s] buffers (s: the elements of one channel of one
// example, h * w for images). What ops/norm.cc's batch_norm op runs in place
// of the composite of primitives it is tested against (tests/ops).
//
// Forward, per channel over its n * s values: mean, then the biased variance
// around it (two passes, as accurate as the composite), then one pass
// y = (x - mean) * invstd * w + b. Backward, per channel: one pass for
// sum(g) and sum(g * xhat), one for
//   g_x = w * invstd * (g - mean(g) - xhat * mean(g * xhat)).
// The composite takes about 9 passes over the activations forward and 12
// backward (each primitive and its broadcast reductions). Sums accumulate in
// double (8 lanes), so f32 inputs give the statistics their f64 copies give.
// Channels split over the pool.
#pragma once

#include <cstdint>

namespace braid::cpu {

// stats [2, c]: mean, then 1 / sqrt(var + eps). w, b [c] or null (1, 0).
template <class T>
void batch_norm_forward(const T* x, const T* w, const T* b, T* y, double* stats, int64_t n, int64_t c, int64_t s,
                        double eps);

// sums [2, c]: sum(g), sum(g * xhat) over each channel's values (the
// gradients of b and of w).
template <class T>
void batch_norm_backward(const T* g, const T* x, const T* w, const double* stats, T* gx, T* sums, int64_t n, int64_t c,
                         int64_t s);

}  // namespace braid::cpu
