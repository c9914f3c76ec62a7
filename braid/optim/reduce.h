// Parallel reductions the layer-wise optimizers (LARS, LAMB) and gradient
// clipping need. Sums accumulate in double so the norm of a large parameter
// does not lose digits.
#pragma once

#include <cstdint>
#include <functional>

namespace braid::optim {

// Sum of term(k) for k in [0, n), split over the intra-op pool.
double parallel_sum(int64_t n, const std::function<double(int64_t lo, int64_t hi)>& chunk_sum);

// Sum of x[k]^2.
double sum_squares(const float* x, int64_t n);

}  // namespace braid::optim
