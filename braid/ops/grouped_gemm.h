// Grouped GEMM: one product per group of consecutive rows, every group in one
// call (the experts of a mixture-of-experts layer, braid/nn/moe.h). The rows
// of x are sorted by group, counts[g] rows each; group g multiplies its rows
// by its own matrix w[g].
//
// On the CPU the call is one parallel loop over (group, row tile) tasks, each
// a single-threaded BLAS product on a worker of the intra-op pool: the small
// per-expert products of an MoE layer keep every thread busy instead of each
// running alone on the whole pool (bench/ops/grouped_gemm_bench.cc measures
// it against a loop of per-expert matmuls).
#pragma once

#include <vector>

#include "braid/tensor/tensor.h"

namespace braid {

// x [N, K], counts [G] (sum N) -> y [N, M]: y_g = x_g w_g^T with w [G, M, K]
// (transpose_w, the nn::Linear layout), or y_g = x_g w_g with w [G, K, M].
// f32/f64, CPU; differentiable in x and w.
Tensor grouped_gemm(const Tensor& x, const Tensor& w, const std::vector<int64_t>& counts, bool transpose_w = true);

// a [N, P], b [N, Q], counts [G] -> [G, P, Q]: out_g = a_g^T b_g (the weight
// gradient of grouped_gemm; a group with no rows gives zeros).
Tensor grouped_gemm_weight(const Tensor& a, const Tensor& b, const std::vector<int64_t>& counts);

}  // namespace braid
