// The simulator's interleaved and zero-bubble pipelines against the
// runtime's own timelines (parallel/pipeline/schedule.h) and the schedules'
// bubble formulas, on idealised inputs: layers of known times, free links,
// enough cores that compute never shares.
#include <gtest/gtest.h>

#include "braid/parallel/pipeline/schedule.h"
#include "braid/sim/plan_model.h"

namespace braid::sim {
namespace {

namespace pp = parallel::pipeline;

constexpr double kF = 1e-3, kB = 2e-3, kU = 0.5e-3;  // per layer, seconds

// Every layer has weights (so a split backward halves it into B and W).
StepProfile uniform_profile(int layers) {
  StepProfile p;
  p.model = "synthetic";
  p.batch = 16;
  for (int l = 0; l < layers; ++l) {
    p.layers.push_back({.name = std::to_string(l), .forward = kF, .backward = kB, .update = kU,
                        .parameter_bytes = 1000, .output_bytes = 100, .nodes = 1});
    p.gradients.push_back({.name = std::to_string(l) + ".weight", .layer = l, .bytes = 1000, .ready = 0});
  }
  return p;
}

Cluster ideal(int ranks) {
  Cluster c;
  c.ranks = ranks;
  c.ranks_per_host = ranks;
  c.cores_per_host = 1024;
  c.intra = {.alpha = 0, .beta = 1e-18, .gamma = 0};
  c.inter = c.intra;
  return c;
}

// One step of P ranks holding V chunks of one layer each: its end equals
// the timeline of the same costs (each rank's last action, then its V
// layers' updates), and the forward-backward part's idle time over the work
// is the schedule's formula: (P-1)/(V M) interleaved, (P-1)(F+B-W)/(M(F+B+W))
// for ZB-H1, here with B = W = half a backward.
TEST(SimPipelineSchedules, StepsMatchTheTimelinesAndTheFormulas) {
  struct Run {
    const char* schedule;
    int v;
    pp::Costs costs;
  };
  for (const Run& r : {Run{"1f1b", 1, {kF, kB, 0}}, Run{"interleaved", 2, {kF, kB, 0}},
                       Run{"zero_bubble", 1, {kF, kB / 2, kB / 2}}}) {
    for (int P : {2, 4}) {
      for (int M : {P, 2 * P, 4 * P}) {
        PlanSpec plan{.strategy = "none", .world = P, .pipeline = P, .schedule = r.schedule, .virtual_stages = r.v,
                      .microbatches = M};
        StepModelInputs in{.profile = uniform_profile(P * r.v)};
        for (int l = 0; l < P * r.v; ++l) in.stage_of_layer.push_back(l);  // virtual stage l
        Simulator sim(ideal(P));
        const StepMarks marks = add_steps(sim, plan, in, 1);
        sim.run();
        double end = 0;
        for (TaskId t : marks.steps.back()) end = std::max(end, sim.times(t).end);
        const pp::Schedule s = pp::parse_schedule(r.schedule);
        const auto tl = pp::timeline(s, P, M, r.v, r.costs);
        double want = 0;
        for (const auto& rank : tl) want = std::max(want, rank.back().end + r.v * kU);
        EXPECT_NEAR(end, want, 1e-12) << r.schedule << " P=" << P << " M=" << M;
        const double busy = M * r.v * (kF + kB);
        const double fb = end - r.v * kU;  // the last rank to finish is rank 0, whose update ends the step
        EXPECT_NEAR((fb - busy) / busy, pp::bubble_ratio_formula(s, P, M, r.v, r.costs), 1e-9)
            << r.schedule << " P=" << P << " M=" << M;
      }
    }
  }
}

}  // namespace
}  // namespace braid::sim
