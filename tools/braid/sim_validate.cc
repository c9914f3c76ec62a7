// `braid sim --validate`: the predicted plan run for real on this machine,
// under `braid launch` (processes over shared memory or loopback TCP, as
// parallel.transport says), and its measured step time set beside the
// prediction. Steps are timed by the trainer itself (metrics.jsonl's step_ms
// with train.log_every = 1: one record per step); the first fifth of the steps
// (warm-up: the kernel autotuner, the buckets' first fill) is left out and the
// median of the rest is a run's figure — the typical step, as the simulator
// plays it, not one stretched by the scheduler's occasional preemption on a
// busy machine — and the median over --reps runs is compared.
// Runs across network namespaces with shaped links: bench/sim/validate.py.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "tools/braid/commands.h"
#include "tools/braid/sim_command.h"

namespace braid::cli {

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One real run; the median step_ms of its steps after the first fifth, in seconds.
double run_once(const SimArgs& args, const sim::PlanSpec& plan, const std::string& dir, int rep) {
  const std::string exe = self_exe();
  std::string cmd = quote(exe) + " launch";
  if (plan.servers > 0) {
    cmd += fmt::format(" --servers {} --workers {}", plan.servers, plan.workers());
  } else {
    cmd += fmt::format(" -n {}", plan.world);
  }
  cmd += " -- " + quote(exe) + " train " + quote(args.config);
  std::vector<std::string> sets = args.sets;
  sets.insert(sets.end(), {fmt::format("train.max_steps={}", args.validate_steps), "train.log_every=1",
                           "train.out_dir=" + dir, "train.eval_every=0", "train.checkpoint_every=0"});
  for (const auto& s : sets) cmd += " --set " + quote(s);
  const std::string log = dir + "/launch.log";
  std::filesystem::create_directories(dir);
  const int rc = std::system((cmd + " > " + quote(log) + " 2>&1").c_str());
  if (rc != 0) fail<Error>("braid sim --validate: run {} failed (exit {}); its output is in {}", rep, rc, log);
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<double> steps;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step_ms") && j["step_ms"].is_number()) steps.push_back(j["step_ms"].get<double>());
  }
  if (steps.size() < 5) {
    fail<Error>("braid sim --validate: run {} logged {} steps in {}/metrics.jsonl (need 5)", rep, steps.size(), dir);
  }
  steps.erase(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 5));
  return median(steps) / 1e3;
}

}  // namespace

Validation sim_validate(sim::Predictor& predictor, const SimArgs& args, const train::Config& config,
                        const sim::Prediction& predicted) {
  if (predicted.plan.world > 1 && args.predict.cluster.hosts() > 1) {
    std::printf("note: --validate runs every rank on this one machine; the prediction is for %d hosts\n",
                args.predict.cluster.hosts());
  }
  const std::string base = (std::filesystem::temp_directory_path() /
                            fmt::format("braid-sim-validate-{}", static_cast<long>(::getpid()))).string();
  std::vector<double> predictions, runs;
  for (int rep = 0; rep < args.reps; ++rep) {
    double p = predicted.step;
    if (args.predict.calibrate) {
      sim::PredictOptions o = args.predict;
      o.recalibrate = true;
      o.trace = false;
      p = predictor.predict(config, o).step;
    }
    predictions.push_back(p);
    runs.push_back(run_once(args, predicted.plan, fmt::format("{}/run{}", base, rep), rep));
    std::printf("  run %d: predicted %.3f ms, measured %.3f ms per step\n", rep + 1, p * 1e3, runs.back() * 1e3);
    std::fflush(stdout);
  }
  std::filesystem::remove_all(base);
  Validation v{.predicted = median(predictions), .measured = median(runs), .runs = {}};
  for (size_t i = 0; i < runs.size(); ++i) v.runs.emplace_back(predictions[i], runs[i]);
  std::printf("predicted %.3f ms, measured %.3f ms (medians of %d runs of %d steps): error %+.1f %%\n",
              v.predicted * 1e3, v.measured * 1e3, args.reps, args.validate_steps,
              100 * (v.predicted - v.measured) / v.measured);
  return v;
}

}  // namespace braid::cli
