// A config's step time on a described cluster: the plan `braid train` would
// run (plan_spec.h), its step profile from the op table (step_profile.h), the
// tasks of a few steps (plan_model.h) played by the simulator (engine.h).
//
//   sim::OpTable table;
//   sim::Predictor predictor(table);
//   sim::Prediction p = predictor.predict(config, {.cluster = cluster, .servers = 0});
//   p.step, p.compute, p.exposed_comm, p.waits
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "braid/sim/cluster.h"
#include "braid/sim/op_table.h"
#include "braid/sim/plan_spec.h"
#include "braid/sim/step_profile.h"

namespace braid::sim {

struct PredictOptions {
  Cluster cluster{};  // cluster.ranks is the job's world size, servers included
  int servers = 0;    // parameter servers (parallel.strategy = ps)
  int steps = 4;      // steps played; the prediction is their mean
  // Compute of every rank and step takes exp(N(0, jitter^2) - jitter^2 / 2)
  // times as long (a lognormal with mean 1): stragglers drawn at random.
  double jitter = 0;
  uint64_t seed = 1;
  bool trace = false;  // keep the simulated timeline (Prediction::trace)
  // Scale the op table's sum to one measured eager step of the model at the
  // plan's (micro-)batch and threads (scale_to in step_profile.h; measured once
  // and kept in the op table).
  bool calibrate = true;
  // Measure that eager step now even if the table has it (a machine whose
  // speed drifts: --validate measures it beside each real run).
  bool recalibrate = false;
  // When the cluster is this machine: how the eager step is measured with
  // `corun` copies computing at once (the workers that share a host; the
  // caller starts them, e.g. as processes under braid launch), since ranks
  // that compute side by side slow each other down (memory bandwidth, shared
  // caches). Null: measured alone in this process.
  std::function<double(const train::Config&, const EagerStep& how, int corun)> measure_step{};
};

struct Prediction {
  PlanSpec plan;
  double step = 0;          // seconds per step (mean over the workers)
  double samples_per_s = 0; // examples of the whole job per second
  // Per step, mean over the workers: the training stream busy, waiting on
  // communication, waiting on other ranks (pipeline bubbles, stragglers).
  double compute = 0, exposed_comm = 0, waits = 0;
  double profile_step = 0;  // one replica's forward + backward + update at the plan's micro-batch, alone
  double calibration = 1;   // measured eager step / the op table's sum (1 without calibration)
  int corun = 1;            // copies of the step that ran side by side in that measurement
  int64_t tasks = 0;
  double wall = 0;          // seconds the simulation took
  nlohmann::json trace{};   // Chrome trace-event JSON (PredictOptions::trace)
  std::vector<int> stage_of_layer{};  // the pipeline cut the prediction assumed (empty: none)
  nlohmann::json to_json() const;
};

// ConfigError unless train.device is the CPU: the op table holds times
// measured on this machine's CPU, so a prediction for a GPU config would be
// the CPU's step, silently.
void require_cpu_device(const train::Config& config);

class Predictor {
 public:
  explicit Predictor(OpTable& table) : table_(table) {}
  Prediction predict(const train::Config& config, const PredictOptions& options);

 private:
  struct Profiled {
    StepProfile profile;
    double calibration = 1;
  };
  const Profiled& profile(const train::Config& config, const EagerStep& how, int corun, const PredictOptions& o);
  OpTable& table_;
  std::map<std::string, Profiled> profiles_;  // by model config, batch, threads and calibration
};

}  // namespace braid::sim
