// Parallel reductions the layer-wise optimizers (LARS, LAMB) and gradient
// clipping need. Sums accumulate in double so the norm of a large parameter
// does not lose digits.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::optim {

// Sum of term(k) for k in [0, n), split over the intra-op pool.
double parallel_sum(int64_t n, const std::function<double(int64_t lo, int64_t hi)>& chunk_sum);

// Sum of x[k]^2.
double sum_squares(const float* x, int64_t n);

// Sum of the squares of every element of the defined tensors (contiguous f32),
// wherever they live: host tensors by the loop above, a device's by ops on
// that device (f32 partials; one value copied back per device, not per tensor).
double sum_squares(const std::vector<Tensor>& tensors);

}  // namespace braid::optim
