#include "braid/sim/predict.h"

#include <chrono>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "braid/base/error.h"
#include "braid/base/hash.h"
#include "braid/nn/sequential.h"
#include "braid/parallel/pipeline/partition.h"
#include "braid/parallel/tensor_parallel/rewrite.h"
#include "braid/sim/codec_cost.h"
#include "braid/sim/engine.h"
#include "braid/sim/plan_model.h"
#include "braid/tensor/device.h"
#include "braid/train/trainer_setup.h"

namespace braid::sim {

namespace {

// The layer of the model each pipeline stage starts at, as the pipeline plan
// cuts it: explicit boundaries, or balanced by parameters (the plan's
// estimate) or by time (here: the profile's own per-layer times).
std::vector<int> stage_of_layer(const train::Config& config, const nn::Sequential& model, const StepProfile& profile,
                                int stages) {
  std::vector<int> starts;
  const std::string boundaries = config.get_string("parallel.stage_boundaries");
  if (!boundaries.empty()) {
    std::vector<int> b;
    for (size_t pos = 0; pos < boundaries.size();) {
      size_t end = boundaries.find(',', pos);
      if (end == std::string::npos) end = boundaries.size();
      b.push_back(std::stoi(boundaries.substr(pos, end - pos)));
      pos = end + 1;
    }
    starts = parallel::pipeline::starts_from_boundaries(b, static_cast<int>(model.size()), stages);
  } else if (config.get_string("parallel.balance") == "time") {
    std::vector<double> costs;
    for (const LayerProfile& l : profile.layers) costs.push_back(l.forward + l.backward);
    starts = parallel::pipeline::balanced_starts(costs, stages);
  } else {
    starts = parallel::pipeline::balanced_starts(parallel::pipeline::parameter_costs(model), stages);
  }
  std::vector<int> stage(model.size(), 0);
  for (size_t l = 0; l < stage.size(); ++l) {
    for (size_t s = 0; s < starts.size(); ++s) {
      if (static_cast<int>(l) >= starts[s]) stage[l] = static_cast<int>(s);
    }
  }
  return stage;
}

}  // namespace

void require_cpu_device(const train::Config& config) {
  train::require_cpu_device(config, "braid sim",
                            "its op costs are measured on this machine's CPU, so it would predict the CPU's step");
}

nlohmann::json Prediction::to_json() const {
  return {{"plan", plan.describe()},   {"step_s", step},
          {"samples_per_s", samples_per_s}, {"compute_s", compute},
          {"exposed_comm_s", exposed_comm}, {"waits_s", waits},
          {"profile_step_s", profile_step}, {"calibration", calibration}, {"tasks", tasks},
          {"world", plan.world},       {"strategy", plan.strategy}};
}

const Predictor::Profiled& Predictor::profile(const train::Config& config, const EagerStep& how, int corun,
                                               const PredictOptions& o) {
  const bool calibrate = o.calibrate, again = o.recalibrate;
  if (!o.measure_step) corun = 1;
  const nlohmann::json j = config.to_json();
  const std::string model = j.at("model").dump() + "|" + j.at("optim").dump() + "|" + j.at("data").dump() + "|" +
                            config.get_string("train.precision");
  const std::string shape = fmt::format("b{}|t{}{}", how.batch, how.threads,
                                        how.microbatches > 1 ? fmt::format("|m{}", how.microbatches) : "");
  const std::string key = fmt::format("{}|{}|{}|{}", model, shape, calibrate, corun);
  auto it = profiles_.find(key);
  if (it != profiles_.end() && !again) return it->second;
  if (it != profiles_.end()) profiles_.erase(it);
  Profiled p{.profile = profile_step(config, table_, how.batch, how.threads)};
  if (calibrate) {
    const int micro = how.microbatches;
    const double sum = p.profile.step(micro);
    const double eager = table_.figure(
        fmt::format("step|{:016x}|{}|x{}", fnv1a(model), shape, corun),
        [&] { return corun > 1 ? o.measure_step(config, how, corun) : measure_eager_step(config, how); }, again);
    if (sum > 0) p.calibration = eager / sum;
    scale_to(p.profile, eager, micro);
  }
  return profiles_.emplace(key, std::move(p)).first->second;
}

Prediction Predictor::predict(const train::Config& config, const PredictOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  require_cpu_device(config);
  const Cluster& cluster = o.cluster;
  Prediction out;
  out.plan = plan_spec(config, cluster.ranks, o.servers, std::min(cluster.ranks_per_host, cluster.ranks),
                       static_cast<int>(cluster.cores_per_host));
  const PlanSpec& plan = out.plan;
  const int64_t micro = plan.batch / plan.microbatches;

  const int corun = std::min(plan.workers(), cluster.ranks_per_host);
  const Profiled& profiled =
      profile(config, {.batch = micro, .threads = plan.threads, .microbatches = plan.microbatches}, corun, o);
  StepModelInputs in{.profile = profiled.profile};
  out.profile_step = in.profile.step();
  out.calibration = profiled.calibration;
  out.corun = o.calibrate && o.measure_step ? corun : 1;
  if (plan.tensor > 1 || plan.pipeline > 1) {
    auto model = std::dynamic_pointer_cast<nn::Sequential>(train::model_and_batch(config).model);
    if (!model) fail<ConfigError>("braid sim: tensor and pipeline parallelism need a sequential model");
    if (plan.tensor > 1) {
      for (auto role : parallel::tensor_parallel::tensor_parallel_roles(*model)) {
        in.tensor_roles.push_back(static_cast<int>(role));
      }
    }
    // Interleaved: the cut is into P V virtual stages (chunk c of rank p is c P + p).
    const int chunks = plan.schedule == "interleaved" ? plan.virtual_stages : 1;
    if (plan.pipeline > 1) in.stage_of_layer = stage_of_layer(config, *model, in.profile, plan.pipeline * chunks);
    out.stage_of_layer = in.stage_of_layer;
  }
  if (o.calibrate) {
    const nlohmann::json j = config.to_json();
    in.load = table_.figure(fmt::format("load|{:016x}|b{}", fnv1a(j.at("data").dump()), plan.batch),
                            [&] { return measure_batch_load(config, plan.batch); });
  }
  if (plan.codec != "none" && plan.data > 1) {
    comm::codec::CodecOptions codec = train::plan_options(config, std::chrono::seconds(1)).codec;
    in.codec = measure_codec(codec, static_cast<size_t>(plan.bucket_bytes / 4));
  }
  if (o.jitter > 0) {
    std::mt19937_64 rng(o.seed);
    std::normal_distribution<double> normal(0, o.jitter);
    const int played = plan.strategy == "local_sgd" ? std::max(o.steps, plan.local_sgd_period) : o.steps;
    in.jitter.assign(static_cast<size_t>(cluster.ranks), std::vector<double>(static_cast<size_t>(played)));
    for (auto& rank : in.jitter) {
      for (double& f : rank) f = std::exp(normal(rng) - o.jitter * o.jitter / 2);
    }
  }

  // Local SGD's averaging comes every period steps: play at least one period.
  const int steps = plan.strategy == "local_sgd" ? std::max(o.steps, plan.local_sgd_period) : o.steps;
  Simulator sim(cluster);
  const StepMarks marks = add_steps(sim, plan, in, steps);
  const SimResult result = sim.run();
  const int W = plan.workers();
  double end = 0;
  for (int w = 0; w < W; ++w) {
    const double late = marks.offsets[static_cast<size_t>(w)];  // a wait in the breakdown, not the steps'
    end += sim.times(marks.steps.back()[static_cast<size_t>(w)]).end - late;
    const RankBreakdown& b = result.ranks[static_cast<size_t>(plan.servers + w)];
    out.compute += b.compute;
    out.exposed_comm += b.exposed_comm;
    out.waits += b.waits - late;
  }
  const double per = 1.0 / (W * steps);
  out.step = end * per;
  out.compute *= per;
  out.exposed_comm *= per;
  out.waits *= per;
  out.samples_per_s = out.step > 0 ? static_cast<double>(plan.batch * plan.data) / out.step : 0;
  out.tasks = result.tasks;
  if (o.trace) out.trace = sim.to_trace();
  out.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace braid::sim
