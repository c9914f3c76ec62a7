// One rank's view of a training step under a plan: step time, samples/s and
// memory, printed as one JSON line per rank for mp_bench.py.
//
//   braid launch -n 2 -- build/bin/mp_step CONFIG STEPS WARMUP [--set key=value ...]
//
// Memory is read from the host allocator's categories (tensor/allocator.h):
// the bytes of parameters, gradients and optimizer state this rank holds
// after the timed steps, each one's peak during them and their sum's peak
// (model state at its highest at one moment), and the most bytes
// in use of any kind (activations included).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/base/median.h"
#include "braid/nn/sequential.h"
#include "braid/tensor/allocator.h"
#include "braid/train/trainer_setup.h"

using namespace braid;

namespace {

double median_or_zero(const std::vector<double>& v) { return v.empty() ? 0 : upper_median(v); }

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 4) {
    std::fprintf(stderr, "usage: mp_step CONFIG STEPS WARMUP [--set key=value ...]\n");
    return 2;
  }
  const int steps = std::stoi(argv[2]), warmup = std::stoi(argv[3]);
  std::vector<std::string> sets;
  for (int i = 4; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--set" && i + 1 < argc) sets.push_back(argv[++i]);
  }
  train::Config config = train::load_config(argv[1], sets);
  train::TrainingRun run = train::make_training_run(config);
  train::Trainer& trainer = *run.trainer;
  std::vector<double> ms, busy, stage_ms;
  int max_live = 0;
  int64_t samples = 0;
  int done = 0;
  for (int64_t epoch = 0; done < warmup + steps; ++epoch) {
    run.train_loader->start_epoch(epoch);
    while (auto b = run.train_loader->next()) {
      if (done == warmup) CachingAllocator::host().reset_peak();
      const auto t0 = std::chrono::steady_clock::now();
      trainer.train_step(*b);
      const double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (done >= warmup) {
        ms.push_back(dt), samples += b->size();
        const nlohmann::json st = trainer.plan().step_stats();  // a pipeline stage's figures
        if (st.contains("busy_ms")) {
          busy.push_back(st.at("busy_ms").get<double>());
          stage_ms.push_back(st.at("step_ms").get<double>());
          max_live = std::max(max_live, st.at("max_live_microbatches").get<int>());
        }
      }
      if (++done == warmup + steps) break;
    }
  }
  const parallel::Plan& plan = trainer.plan();
  const AllocatorStats mem = CachingAllocator::host().stats();
  const double step_ms = median_or_zero(ms);
  size_t largest_layer = 0;  // bytes of the largest layer's parameters (ZeRO stage 3 gathers one at a time)
  if (const auto* seq = dynamic_cast<const nn::Sequential*>(&trainer.model())) {
    for (size_t i = 0; i < seq->size(); ++i) {
      size_t bytes = 0;
      for (const Tensor& p : seq->layer(i)->parameters()) bytes += p.nbytes();
      largest_layer = std::max(largest_layer, bytes);
    }
  }
  nlohmann::json out = {{"rank", plan.mesh().rank()},
                        {"mesh", plan.mesh().describe()},
                        {"plan", plan.describe()},
                        {"step_ms", step_ms},
                        {"batch", samples / std::max<int64_t>(1, static_cast<int64_t>(ms.size()))},
                        {"param_bytes", mem[MemoryCategory::parameters].in_use},
                        {"grad_bytes", mem[MemoryCategory::gradients].in_use},
                        {"optim_bytes", mem[MemoryCategory::optimizer_state].in_use},
                        {"param_peak", mem[MemoryCategory::parameters].peak},
                        {"grad_peak", mem[MemoryCategory::gradients].peak},
                        {"optim_peak", mem[MemoryCategory::optimizer_state].peak},
                        {"state_peak", mem.model_state_peak},
                        {"peak_bytes", mem.peak_bytes_in_use},
                        {"largest_layer_bytes", largest_layer}};
  if (!busy.empty()) {
    // Busy: this stage's forward and backward compute; the stage's step: its
    // part of the step from the first forward to the loss broadcast.
    out["busy_ms"] = median_or_zero(busy);
    out["stage_ms"] = median_or_zero(stage_ms);
    out["max_live_microbatches"] = max_live;
  }
  std::printf("MP_STEP %s\n", out.dump().c_str());
  return 0;
} catch (const braid::Error& e) {
  std::fprintf(stderr, "mp_step: %s\n", e.what());
  return 1;
}
