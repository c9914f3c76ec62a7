// Device kernels of the norm family: layer norm's fused row kernels and batch
// norm's running-statistics update. Rows are contiguous [rows, d]; each
// row's statistics and the backward's two sums accumulate in double, as on
// the CPU. A row of at least 64 elements gets a CUDA block (its threads
// stride over the row and combine through reduce_loop.h's block_all), a
// shorter one a thread.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// y = (x - mean) * rstd * w + b per row (w, b [d] or null); stats [rows, 2]
// f64 gets (mean, rstd = 1 / sqrt(var + eps)).
void layer_norm(DType dtype, void* y, double* stats, const void* x, const void* w, const void* b, int64_t rows,
                int64_t d, double eps);

// gx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) with xhat = (x - mean)
// * rstd and gh = g * w (w may be null); gxhat = g * xhat when not null.
void layer_norm_backward(DType dtype, void* gx, void* gxhat, const void* g, const void* x, const void* w,
                         const double* stats, int64_t rows, int64_t d);

// running[ix(i)] = running[ix(i)] * keep + batch[i] * take over n elements
// (batch contiguous); keep and take rounded to the dtype first, as the CPU does.
void running_update(DType dtype, void* running, const Indexer<1>& ix, const void* batch, int64_t n, double keep,
                    double take);

}  // namespace braid::cuda
