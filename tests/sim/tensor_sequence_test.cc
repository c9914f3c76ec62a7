// Tensor parallelism's block under braid sim against hand-computed timelines
// (docs/sim.md, "Tensor and sequence parallelism"): one transformer block on
// two tensor ranks, ring collectives on links of known alpha and beta, free
// cores, as plain TP and with sequence parallelism, blocking and overlapped.
#include <gtest/gtest.h>

#include <algorithm>

#include "braid/parallel/tensor_parallel/rewrite.h"
#include "braid/sim/plan_model.h"

namespace braid::sim {
namespace {

using parallel::tensor_parallel::LayerRole;

// One block: forward 1 ms (of it GEMMs 0.6 ms, norms/dropout/residuals
// 0.2 ms), backward 2 ms (1.2 and 0.4), update 0.5 ms; its output n bytes.
constexpr double kF = 1e-3, kB = 2e-3, kU = 0.5e-3, kGF = 0.6e-3, kGB = 1.2e-3, kSF = 0.2e-3, kSB = 0.4e-3;
constexpr double kAlpha = 5e-6, kN = 1e6;
constexpr int kChunks = 4;

// norm: a final norm after the block (replicated under plain TP), 1 ms
// forward, 2 ms backward, 0.5 ms update, no GEMM.
StepModelInputs block_inputs(bool norm = false) {
  StepProfile p;
  p.model = "synthetic";
  p.batch = 8;
  p.layers.push_back({.name = "block", .forward = kF, .backward = kB, .update = kU, .parameter_bytes = 1000,
                      .output_bytes = static_cast<int64_t>(kN), .nodes = 1, .gemm_forward = kGF,
                      .gemm_backward = kGB, .sequence_forward = kSF, .sequence_backward = kSB});
  p.gradients.push_back({.name = "block.weight", .layer = 0, .bytes = 1000, .ready = kB});
  p.forward = kF;
  p.backward = kB;
  p.update = kU;
  p.parameter_bytes = 1000;
  StepModelInputs in{.profile = p};
  in.tensor_roles = {static_cast<int>(LayerRole::block)};
  if (norm) {
    in.profile.layers.push_back({.name = "norm", .forward = kF, .backward = kB, .update = kU, .parameter_bytes = 8,
                                 .output_bytes = static_cast<int64_t>(kN), .nodes = 1, .sequence_forward = kF,
                                 .sequence_backward = kB});
    in.profile.gradients.insert(in.profile.gradients.begin(), {.name = "norm.weight", .layer = 1, .bytes = 8,
                                                               .ready = kB});
    in.profile.gradients.back().ready += kB;
    in.profile.forward += kF;
    in.profile.backward += kB;
    in.profile.update += kU;
    in.tensor_roles.push_back(static_cast<int>(LayerRole::replicated));
  }
  return in;
}

double step(bool sequence_parallel, bool overlap, double beta, bool norm = false) {
  PlanSpec plan{.strategy = "none", .world = 2, .tensor = 2, .sequence_parallel = sequence_parallel,
                .tp_overlap = overlap, .algorithm = comm::Algorithm::ring};
  Cluster c;
  c.ranks = 2;
  c.ranks_per_host = 2;
  c.cores_per_host = 1024;
  c.intra = {.alpha = kAlpha, .beta = beta, .gamma = 0};
  c.inter = c.intra;
  Simulator sim(c);
  const StepMarks marks = add_steps(sim, plan, block_inputs(norm), 1);
  sim.run();
  double end = 0;
  for (TaskId t : marks.steps.back()) end = std::max(end, sim.times(t).end);
  return end;
}

// On two ranks the ring all-reduce of n bytes is 2 alpha + n beta; its halves,
// the all-gather and the reduce-scatter, alpha + n / 2 beta each.
double allreduce(double n, double beta) { return 2 * kAlpha + n * beta; }
double half(double n, double beta) { return kAlpha + n / 2 * beta; }
// k chunks of compute g pipelined with k of communication c.
double pipelined(double g, double c) { return g + (kChunks - 1) * std::max(g, c) + c; }

// Blocking plain TP: the sequence-wise work whole on each rank, the rest
// halved, two all-reduces each way.
double plain_blocking(double beta) {
  return kSF + (kF - kSF) / 2 + kSB + (kB - kSB) / 2 + 4 * allreduce(kN, beta) + kU / 2;
}
// Blocking sequence parallelism: everything halved; each all-reduce an
// all-gather and a reduce-scatter.
double sp_blocking(double beta) { return kF / 2 + kB / 2 + 8 * half(kN, beta) + kU / 2; }

// One direction of a block: four products of a quarter of the rank's GEMM
// time each (q), the rest in two pieces; the collectives beside products.
double sp_pass(double mine, double gemm, double beta) {
  const double q = gemm / 2 / 4, rest = (mine - 4 * q) / 2;
  return 2 * rest + 4 * pipelined(q / kChunks, half(kN / kChunks, beta));
}
double plain_pass(double mine, double gemm, double beta) {
  const double q = gemm / 2 / 4, rest = (mine - 4 * q) / 2;
  return 2 * q + 2 * rest + 2 * pipelined(q / kChunks, allreduce(kN / kChunks, beta));
}

TEST(SimTensorSequence, BlockingSequenceParallelHalvesTheNormsAndSplitsEachAllreduce) {
  for (double beta : {1e-9, 1e-10}) {
    EXPECT_NEAR(step(false, false, beta), plain_blocking(beta), 1e-12) << beta;
    EXPECT_NEAR(step(true, false, beta), sp_blocking(beta), 1e-12) << beta;
    // The same bytes and latencies on the wire: only the norms' share differs.
    EXPECT_NEAR(step(false, false, beta) - step(true, false, beta), (kSF + kSB) / 2, 1e-12);
  }
}

// A norm outside the blocks runs on the segment under sequence parallelism
// (half its forward and backward on each of 2 ranks) and whole under plain
// TP; its weights and update are whole on every rank either way.
TEST(SimTensorSequence, AFinalNormRunsOnTheSegmentButUpdatesWhole) {
  const double beta = 1e-9;
  EXPECT_NEAR(step(false, false, beta, true) - step(false, false, beta), kF + kB + kU, 1e-12);
  EXPECT_NEAR(step(true, false, beta, true) - step(true, false, beta), (kF + kB) / 2 + kU, 1e-12);
}

// Overlapped: each collective pipelined with its product in 4 chunks, the
// pass max(compute, communication) plus one chunk of the other. beta 1e-9:
// a chunk's all-gather (130 us) outlasts its product (18.75 us); 1e-10: it
// does not (17.5 us).
TEST(SimTensorSequence, OverlapPipelinesEachCollectiveWithItsProduct) {
  for (double beta : {1e-9, 1e-10}) {
    EXPECT_NEAR(step(true, true, beta), sp_pass(kF / 2, kGF, beta) + sp_pass(kB / 2, kGB, beta) + kU / 2, 1e-12)
        << beta;
    const double fwd = kSF + (kF - kSF) / 2, bwd = kSB + (kB - kSB) / 2;
    EXPECT_NEAR(step(false, true, beta), plain_pass(fwd, kGF, beta) + plain_pass(bwd, kGB, beta) + kU / 2, 1e-12)
        << beta;
    EXPECT_LT(step(true, true, beta), step(true, false, beta));
    EXPECT_LT(step(false, true, beta), step(false, false, beta));
  }
  // Communication-bound, sequence parallelism hides its collectives behind
  // twice the products plain TP has beside its all-reduces.
  const double sp_gain = step(true, false, 1e-9) / step(true, true, 1e-9);
  const double plain_gain = step(false, false, 1e-9) / step(false, true, 1e-9);
  EXPECT_GT(sp_gain, plain_gain);
}

}  // namespace
}  // namespace braid::sim
