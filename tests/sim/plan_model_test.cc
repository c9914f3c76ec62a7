// Plans as tasks against closed forms on idealised inputs: a synthetic step
// profile (layers of known forward, backward and update times), links of known
// alpha and beta, no reduction cost and enough cores that compute never shares.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/parallel/tensor_parallel/rewrite.h"
#include "braid/sim/collectives.h"
#include "braid/sim/plan_model.h"

namespace braid::sim {
namespace {

constexpr double kF = 1e-3, kB = 2e-3, kU = 0.5e-3;  // per layer, seconds

StepProfile uniform_profile(int layers, int64_t param_bytes, int64_t output_bytes) {
  StepProfile p;
  p.model = "synthetic";
  p.batch = 8;
  double ready = 0;
  for (int l = 0; l < layers; ++l) {
    p.layers.push_back({.name = std::to_string(l), .forward = kF, .backward = kB, .update = kU,
                        .parameter_bytes = param_bytes, .output_bytes = output_bytes, .nodes = 1});
  }
  for (int l = layers - 1; l >= 0; --l) {
    ready += kB;
    p.gradients.push_back({.name = std::to_string(l) + ".weight", .layer = l, .bytes = param_bytes, .ready = ready});
  }
  p.forward = kF * layers;
  p.backward = kB * layers;
  p.update = kU * layers;
  p.parameter_bytes = param_bytes * layers;
  return p;
}

// beta must be positive: "free" links get 1e-18 s/byte.
Cluster ideal(int ranks, double alpha, double beta) {
  beta = std::max(beta, 1e-18);
  Cluster c;
  c.ranks = ranks;
  c.ranks_per_host = ranks;
  c.cores_per_host = 1024;
  c.intra = {.alpha = alpha, .beta = beta, .gamma = 0};
  c.inter = c.intra;
  return c;
}

double run_steps(const Cluster& c, const PlanSpec& plan, const StepModelInputs& in, int steps, SimResult* out = nullptr) {
  Simulator sim(c);
  const StepMarks marks = add_steps(sim, plan, in, steps);
  SimResult r = sim.run();
  double end = 0;
  for (TaskId t : marks.steps.back()) end = std::max(end, sim.times(t).end);
  if (out) *out = r;
  return end;
}

TEST(PlanModel, OneProcessIsTheSumOfItsLayers) {
  PlanSpec plan;
  StepModelInputs in{.profile = uniform_profile(3, 1000, 100)};
  EXPECT_NEAR(run_steps(ideal(1, 0, 0), plan, in, 5), 5 * 3 * (kF + kB + kU), 1e-12);
}

// Gradient accumulation: M forwards and backwards, one update, whichever
// pipeline schedule the config names; the all-reduce waits for the last one.
TEST(PlanModel, AccumulatedMicroBatchesRunOneAfterAnother) {
  for (const char* schedule : {"1f1b", "gpipe"}) {
    PlanSpec plan{.schedule = schedule, .microbatches = 4};
    StepModelInputs in{.profile = uniform_profile(3, 1000, 100)};
    EXPECT_NEAR(run_steps(ideal(1, 0, 0), plan, in, 2), 2 * 3 * (4 * (kF + kB) + kU), 1e-12) << schedule;
    const double alpha = 1e-4;
    PlanSpec dp{.strategy = "allreduce", .world = 2, .data = 2, .schedule = schedule, .microbatches = 4,
                .overlap = false, .algorithm = comm::Algorithm::ring};
    const double ring = 2 * alpha;  // ring on 2 ranks, no bytes to speak of
    EXPECT_NEAR(run_steps(ideal(2, alpha, 0), dp, in, 1), 3 * (4 * (kF + kB) + kU) + ring, 1e-9) << schedule;
  }
}

// GPipe and 1F1B over P stages of one layer each and M micro-batches, free
// links: (M + P - 1)(f + b) plus the update; the bubble is (P-1)/(M+P-1) of
// the forward-backward part, and shows as waits.
TEST(PlanModel, PipelineBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (const char* schedule : {"gpipe", "1f1b"}) {
    for (int P : {2, 3, 4}) {
      for (int M : {1, 2, 4, 8}) {
        PlanSpec plan{.strategy = "none", .world = P, .pipeline = P, .schedule = schedule, .microbatches = M};
        StepModelInputs in{.profile = uniform_profile(P, 1000, 100)};
        for (int l = 0; l < P; ++l) in.stage_of_layer.push_back(l);
        SimResult r;
        const double end = run_steps(ideal(P, 0, 0), plan, in, 1, &r);
        EXPECT_NEAR(end, (M + P - 1) * (kF + kB) + kU, 1e-12) << schedule << " P=" << P << " M=" << M;
        // A stage that finishes early idles until the step's end too (in a
        // run of steps that idle opens the next step).
        double waits = 0;
        for (const auto& b : r.ranks) waits += b.waits + (r.makespan - b.end);
        const double fb = (M + P - 1) * (kF + kB);
        EXPECT_NEAR(waits / P / fb, (P - 1.0) / (M + P - 1.0), 1e-9) << schedule << " P=" << P << " M=" << M;
      }
    }
  }
}

// Without overlap: compute, then one bucket's ring all-reduce
// 2(D-1)alpha + 2(D-1)/D n beta, then the update.
TEST(PlanModel, DataParallelWithoutOverlapAddsTheAllreduce) {
  const double alpha = 5e-6, beta = 1e-9;
  for (int D : {2, 3, 4, 5}) {
    const int64_t bytes = 40000;
    PlanSpec plan{.strategy = "allreduce", .world = D, .data = D, .bucket_bytes = 1e9, .overlap = false,
                  .algorithm = comm::Algorithm::ring};
    StepModelInputs in{.profile = uniform_profile(2, bytes, 100)};
    const double ring = 2 * (D - 1) * alpha + 2.0 * (D - 1) / D * (2 * bytes) * beta;
    EXPECT_NEAR(run_steps(ideal(D, alpha, beta), plan, in, 1), 2 * (kF + kB + kU) + ring, 1e-12) << "D=" << D;
  }
}

// Overlapped buckets: each layer's bucket travels while earlier layers'
// backward runs, so only the first layer's bucket is exposed.
TEST(PlanModel, OverlapHidesAllButTheLastBucket) {
  const double alpha = 5e-6, beta = 1e-9;
  const int D = 4, layers = 4;
  const int64_t bytes = 200000;  // one bucket per layer: 2(D-1)/D n beta = 0.3 ms < kB
  PlanSpec plan{.strategy = "allreduce", .world = D, .data = D, .bucket_bytes = static_cast<double>(bytes),
                .overlap = true, .algorithm = comm::Algorithm::ring};
  StepModelInputs in{.profile = uniform_profile(layers, bytes, 100)};
  const double ring = 2 * (D - 1) * alpha + 2.0 * (D - 1) / D * bytes * beta;
  EXPECT_NEAR(run_steps(ideal(D, alpha, beta), plan, in, 1), layers * (kF + kB + kU) + ring, 1e-12);
  plan.overlap = false;
  EXPECT_NEAR(run_steps(ideal(D, alpha, beta), plan, in, 1), layers * (kF + kB + kU + ring), 1e-12);
}

// Parameter servers, bsp: every worker pushes its gradient, the server
// updates once all have arrived, every worker pulls. One server, W workers
// pushing at once through the server's port: the pushes share its bandwidth.
TEST(PlanModel, SynchronousParameterServerRoundTrip) {
  const double alpha = 10e-6, beta = 1e-9;
  for (int W : {1, 2, 3}) {
    PlanSpec plan{.strategy = "ps", .world = W + 1, .servers = 1, .data = W, .consistency = "bsp"};
    const int64_t bytes = 100000;
    StepModelInputs in{.profile = uniform_profile(1, bytes, 100)};
    // Pushes into one ingress port (W flows share it), the update (gamma 0:
    // just the optimizer's), pulls out of one egress port (W flows share it).
    const double expected = kF + kB + (alpha + W * bytes * beta) + kU + (alpha + W * bytes * beta);
    EXPECT_NEAR(run_steps(ideal(W + 1, alpha, beta), plan, in, 1), expected, 1e-12) << "W=" << W;
    // The passes over the model, gamma per byte each: the worker packs (add,
    // zero), the server adds W pushes and copies each reply (its threads run
    // the W replies side by side), the worker unpacks.
    const double gamma = 1e-10;
    Cluster c = ideal(W + 1, alpha, beta);
    c.intra.gamma = c.inter.gamma = gamma;
    const double passes = (2 + W + 1 + 1) * bytes * gamma;
    EXPECT_NEAR(run_steps(c, plan, in, 1), expected + passes, 1e-12) << "W=" << W;
  }
}

// Tensor parallelism on a linear pair: each rank does half the work; the row
// layer all-reduces its output in forward, the column layer its input
// gradient in backward (not for the first layer, whose input needs none).
TEST(PlanModel, TensorParallelPairHalvesTheWorkAndAddsItsAllreduces) {
  const double alpha = 5e-6, beta = 1e-9;
  using parallel::tensor_parallel::LayerRole;
  PlanSpec plan{.strategy = "none", .world = 2, .tensor = 2, .algorithm = comm::Algorithm::ring};
  StepModelInputs in{.profile = uniform_profile(3, 1000, 4000)};
  in.tensor_roles = {static_cast<int>(LayerRole::replicated), static_cast<int>(LayerRole::column),
                     static_cast<int>(LayerRole::row)};
  const double ar = 2 * alpha + 4000 * beta;  // ring on 2 ranks: 2 alpha + n beta
  const double expected = (kF + kB + kU) + 2 * (kF + kB + kU) / 2 + 2 * ar;
  EXPECT_NEAR(run_steps(ideal(2, alpha, beta), plan, in, 1), expected, 1e-12);
}

TEST(PlanModel, AStragglerHoldsBackEverySynchronousStep) {
  PlanSpec plan{.strategy = "allreduce", .world = 2, .data = 2, .algorithm = comm::Algorithm::ring};
  StepModelInputs in{.profile = uniform_profile(1, 1000, 100)};
  Cluster c = ideal(2, 0, 0);
  c.slowdown = {1.0, 2.0};
  SimResult r;
  EXPECT_NEAR(run_steps(c, plan, in, 3, &r), 3 * 2 * (kF + kB + kU), 1e-12);
  EXPECT_GT(r.ranks[0].waits + r.ranks[0].exposed_comm, 0.9 * 3 * (kF + kB));
}

}  // namespace
}  // namespace braid::sim
