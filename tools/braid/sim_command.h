// What `braid sim` (sim.cc) shares with its sweep (sim_sweep.cc) and its
// validation against real runs (sim_validate.cc).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "braid/sim/predict.h"

namespace braid::cli {

struct SimArgs {
  std::string config;
  std::vector<std::string> sets;
  sim::PredictOptions predict;
  int validate_steps = 60;  // steps of each real run
  int reps = 3;             // real runs per plan
};

// Loads the config with `sets` on top of the command's own.
train::Config sim_config(const SimArgs& args, const std::vector<std::string>& more = {});

// Ranks plans for the same model and world size by predicted samples/s and
// prints them; returns the best one's overrides.
std::vector<std::string> sim_sweep(sim::Predictor& predictor, const SimArgs& args);

// Runs the config under `braid launch` on this machine --reps times and
// prints the predicted and the measured step time. With calibration, each
// run is preceded by a fresh measurement of the eager step the prediction is
// scaled to (this machine's speed drifts over minutes), and the prediction
// made again from it.
struct Validation {
  double predicted = 0, measured = 0;           // medians over the runs, seconds
  std::vector<std::pair<double, double>> runs;  // each run's prediction and measurement
};
Validation sim_validate(sim::Predictor& predictor, const SimArgs& args, const train::Config& config,
                        const sim::Prediction& predicted);

// sim_corun.cc: what `--measure-step` runs in each process, and the
// PredictOptions::measure_step that starts them.
void sim_measure_step_child(const train::Config& config, const std::string& out, const sim::EagerStep& how);
std::function<double(const train::Config&, const sim::EagerStep&, int)> corun_measure();

// sim_links.cc: a transport's costs on this machine, measured by two
// processes under `braid launch` (`--measure-link` is the child's side).
struct MeasuredLink {
  double alpha = 0, beta = 0;                   // s per message one way, s per byte
  double cold_alpha = 0;                         // one way to a receiver that was asleep
  double gamma = 0;                              // s per byte of an f32 sum pass
  double cpu_per_message = 0, cpu_per_byte = 0;  // each end's
};
void sim_measure_link_child(const std::string& transport, const std::string& out);
MeasuredLink measure_link(const std::string& config, const std::string& transport);

}  // namespace braid::cli
