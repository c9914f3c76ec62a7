// What `braid sim` (sim.cc) shares with its sweep (sim_sweep.cc) and its
// validation against real runs (sim_validate.cc).
#pragma once

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

// Runs the config under `braid launch` on this machine and prints the
// predicted and the measured step time; returns the measured seconds.
double sim_validate(const SimArgs& args, const sim::Prediction& predicted);

}  // namespace braid::cli
