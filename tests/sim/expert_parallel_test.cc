// Expert parallelism in the plan model (docs/sim.md, "Mixture of experts"):
// a synthetic profile with one MoE layer of known expert times, weights and
// routed bytes, on links of known alpha and beta, against closed forms.
#include <gtest/gtest.h>

#include <cmath>

#include "braid/sim/plan_model.h"
#include "braid/sim/plan_spec.h"
#include "braid/train/config.h"
#include "braid/train/schema.h"

namespace braid::sim {
namespace {

constexpr double kF = 1e-3, kB = 2e-3, kU = 0.5e-3;  // per layer, seconds
constexpr double kEF = 0.6e-3, kEU = 0.4e-3;          // the MoE layer's experts: forward, update
constexpr int64_t kE = 8;                              // experts
constexpr int64_t kRows = 64 * 1024;                   // bytes one rank dispatches (N top_k rows of d_model)

// Layers 0 and 2 dense, layer 1 an MoE layer whose forward, backward and
// update include its experts' kEF, 2 kEF and kEU. expert_bytes: its experts' gradient.
StepProfile moe_profile(int64_t param_bytes, int64_t expert_bytes, bool moe = true) {
  StepProfile p;
  p.model = "synthetic";
  p.batch = 8;
  for (int l = 0; l < 3; ++l) {
    p.layers.push_back({.name = std::to_string(l), .forward = kF, .backward = kB, .update = kU,
                        .parameter_bytes = param_bytes, .output_bytes = 100, .nodes = 1});
  }
  if (moe) {
    LayerProfile& m = p.layers[1];
    m.experts = kE;
    m.expert_forward = kEF;
    m.expert_backward = 2 * kEF;
    m.expert_update = kEU;
    m.expert_parameter_bytes = expert_bytes;
    m.dispatch_bytes = kRows;
  }
  double ready = 0;
  for (int l = 2; l >= 0; --l) {
    ready += kB;
    p.gradients.push_back({.name = std::to_string(l) + ".weight", .layer = l, .bytes = param_bytes, .ready = ready});
    if (l == 1) {
      p.gradients.push_back(
          {.name = "1.moe.experts", .layer = 1, .bytes = expert_bytes, .ready = ready, .expert = moe});
    }
  }
  p.forward = 3 * kF;
  p.backward = 3 * kB;
  p.update = 3 * kU;
  return p;
}

Cluster ideal(int ranks, double alpha, double beta) {
  Cluster c;
  c.ranks = ranks;
  c.ranks_per_host = ranks;
  c.cores_per_host = 1024;
  c.intra = {.alpha = alpha, .beta = std::max(beta, 1e-18), .gamma = 0};
  c.inter = c.intra;
  return c;
}

PlanSpec plan(int data, int expert) {
  return {.strategy = "allreduce", .world = data, .data = data, .expert = expert, .overlap = false,
          .algorithm = comm::Algorithm::ring};
}

double step(const Cluster& c, const PlanSpec& p, const StepModelInputs& in, int steps = 2) {
  Simulator sim(c);
  const StepMarks marks = add_steps(sim, p, in, steps);
  sim.run();
  double end = 0;
  for (TaskId t : marks.steps.back()) end = std::max(end, sim.times(t).end);
  return end / steps;
}

// Pairwise exchange over X ranks, each sending `bytes` in all: (X-1) (alpha + bytes / X beta).
double alltoall_formula(int X, double bytes, double alpha, double beta) {
  return (X - 1) * (alpha + bytes / X * beta);
}

// parallel.expert = 1 is the model with every expert on every rank: the MoE
// layer's experts run inside it and its gradients go in the data axis's buckets.
TEST(ExpertParallel, OneIsTheDenseMoEPrediction) {
  for (int data : {1, 2, 4}) {
    const Cluster c = ideal(data, 2e-5, 1e-9);
    PlanSpec p = plan(data, 1);
    if (data == 1) p.strategy = "none";
    const double moe = step(c, p, {.profile = moe_profile(4096, 32768)});
    const double dense = step(c, p, {.profile = moe_profile(4096, 32768, /*moe=*/false)});
    EXPECT_NEAR(moe, dense, 1e-12) << "data " << data;
  }
}

// Each MoE layer's step adds four all-to-alls of the routed rows (dispatch
// and combine each way) and one of the E int64 counts, on the critical path;
// everything else is as with one expert group (the experts' weights
// weightless here, so the update and the gradients do not change).
TEST(ExpertParallel, AlltoallsCostTheFormulaForTheirBytes) {
  const double alpha = 3e-5, beta = 2e-9;
  for (int X : {2, 4, 8}) {
    const Cluster c = ideal(X, alpha, beta);
    StepProfile prof = moe_profile(4096, 0);
    prof.layers[1].expert_update = 0;
    const StepModelInputs in{.profile = prof};
    const double ep = step(c, plan(X, X), in);
    const double one = step(c, plan(X, 1), in);
    const double want = 4 * alltoall_formula(X, kRows, alpha, beta) + alltoall_formula(X, 8.0 * kE, alpha, beta);
    EXPECT_NEAR(ep - one, want, 1e-12) << "X " << X;
    // What crosses the wire per rank and exchange: the rows times (X-1)/X.
    EXPECT_NEAR(alltoall_formula(X, kRows, 0, beta), kRows * (X - 1.0) / X * beta, 1e-18);
  }
}

// Under balanced routing a rank's E/X experts take as many rows as it routed
// (N top_k whatever X), so the expert compute per rank stays; the expert
// weights a rank holds and updates halve when X doubles.
TEST(ExpertParallel, DoublingXHalvesTheExpertWeightsARankUpdates) {
  const Cluster c = ideal(8, 0, 0);
  const StepModelInputs in{.profile = moe_profile(0, 0)};
  const double x1 = step(c, plan(8, 1), in), x2 = step(c, plan(8, 2), in), x4 = step(c, plan(8, 4), in);
  EXPECT_NEAR(x1 - x2, kEU / 2, 1e-9);
  EXPECT_NEAR(x2 - x4, kEU / 4, 1e-9);
  // One rank, every expert: the whole layers' compute and update.
  EXPECT_NEAR(x1, 3 * (kF + kB + kU), 1e-9);
}

// The expert gradients are averaged over the data / X replicas of each
// expert slice, E/X of them; the others over the whole data axis. With only
// expert weights carrying bytes, the step over X = 2 of D = 4 grows by a ring
// all-reduce of bytes/2 over 2 ranks against X = 4 (one group, no reduction).
TEST(ExpertParallel, ExpertGradientsReduceOverTheirReplicas) {
  const double beta = 1e-8;
  const Cluster c = ideal(4, 0, beta);
  const int64_t bytes = 1 << 20;
  StepProfile prof = moe_profile(0, bytes);
  prof.layers[1].expert_update = 0;
  const StepModelInputs in{.profile = prof};
  const double x2 = step(c, plan(4, 2), in), x4 = step(c, plan(4, 4), in);
  // a2a's rows: X = 4 sends 3/4 of them, X = 2 half (5 exchanges, counts included).
  const double a2a4 = 4 * alltoall_formula(4, kRows, 0, beta) + alltoall_formula(4, 8.0 * kE, 0, beta);
  const double a2a2 = 4 * alltoall_formula(2, kRows, 0, beta) + alltoall_formula(2, 8.0 * kE, 0, beta);
  const double ring2 = 2 * (2 - 1) / 2.0 * (bytes / 2.0) * beta;  // 2 (p-1)/p n beta, n = bytes / X
  EXPECT_NEAR((x2 - a2a2) - (x4 - a2a4), ring2, 1e-9);
}

TEST(ExpertParallel, PlanSpecReadsTheDegreeAndRefusesBadOnes) {
  auto config = [](std::vector<std::string> sets) {
    train::Config c(train::braid_schema());
    c.set("model.name=gpt");
    c.set("parallel.strategy=allreduce");
    for (const auto& s : sets) c.set(s);
    return c;
  };
  const PlanSpec p = plan_spec(config({"model.moe.experts=8", "parallel.expert=2"}), 4, 0, 4, 4);
  EXPECT_EQ(p.expert, 2);
  EXPECT_EQ(p.data, 4);
  EXPECT_NE(p.describe().find("expert groups of 2"), std::string::npos) << p.describe();
  EXPECT_THROW(plan_spec(config({"model.moe.experts=8", "parallel.expert=3"}), 3, 0, 3, 3), ConfigError);
  EXPECT_THROW(plan_spec(config({"model.moe.experts=8", "parallel.expert=4"}), 2, 0, 2, 2), ConfigError);
  EXPECT_THROW(plan_spec(config({"parallel.expert=2"}), 2, 0, 2, 2), ConfigError);
}

}  // namespace
}  // namespace braid::sim
