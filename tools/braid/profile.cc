// `braid profile CONFIG --device cuda --emulate [--json]`: what one training
// step of the run CONFIG describes asks of a GPU — kernel launches, waits of
// the host for the device, system allocations, bytes moved by copies and casts
// — and the host's own time per op, measured on the emulated CUDA backend's
// null device (braid/cuda/emulated.h; docs/gpu.md, "Step budgets"). Needs no
// GPU; a build with CUDA does not link the emulated backend and refuses it.
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "braid/base/error.h"
#include "braid/train/trainer_setup.h"
#include "tools/braid/commands.h"

#if defined(BRAID_EMULATED_CUDA)
#include "braid/cuda/emulated.h"
#endif

namespace braid::cli {

namespace {

struct ProfileArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string device = "cuda";
  bool emulate = false, json = false, run_kernels = false;
  int64_t warmup = 5, steps = 3;
};

#if defined(BRAID_EMULATED_CUDA)
void profile(const ProfileArgs& a) {
  cuda::emulated::install();
  // With --json, stdout carries the JSON alone: log lines go to stderr.
  if (a.json) spdlog::set_default_logger(spdlog::stderr_color_mt("braid-profile"));
  std::vector<std::string> sets = a.sets;
  sets.push_back("train.device=" + a.device);
  train::Config config = train::load_config(a.config, sets);
  train::TrainingRun run = train::make_training_run(config);
  config.refuse_unread("braid profile");
  // The sequence length, where the data is windows of tokens: [.., T, T]
  // outputs in f32 are attention scores.
  const data::ExampleSpec spec = run.train_data->spec();
  const int64_t square = spec.input_dtype == DType::i64 && spec.input_shape.size() == 1 ? spec.input_shape[0] : 0;
  data::Loader& loader = *run.train_loader;
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  const cuda::emulated::StepProfile p = cuda::emulated::profile_steps(
      [&] {
        std::optional<data::Batch> b = loader.next();
        if (!b) {
          loader.start_epoch(++epoch);
          b = loader.next();
        }
        if (!b) fail<ConfigError>("braid profile: the training set makes no batch (train.batch_size too large?)");
        run.trainer->train_step(*b);
      },
      {.warmup = a.warmup, .steps = a.steps, .null_device = !a.run_kernels, .square = square});
  nlohmann::json j = cuda::emulated::to_json(p);
  j["config"] = a.config;
  j["device"] = a.device + " (emulated" + (a.run_kernels ? ")" : ", null: kernels counted, not run)");
  j["parameters"] = run.model->num_parameters();
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("per step (mean of %lld after %lld warm-up): %.0f launches, %.0f syncs, %.0f allocations, "
              "%.0f op calls, %.2f us host time per op\n", static_cast<long long>(p.steps),
              static_cast<long long>(p.warmup), p.launches, p.syncs, p.allocations, p.op_calls, p.host_us_per_op);
  std::printf("bytes: %.0f cast (%.0f casts), %.0f copied on the device (%.0f copies), %.0f to the device, "
              "%.0f to the host; peak device memory %lld\n", p.cast_bytes, p.casts, p.copy_bytes, p.copies,
              p.to_device_bytes, p.to_host_bytes, static_cast<long long>(p.peak_bytes));
  if (square > 0) {
    std::printf("f32 [.., %lld, %lld] outputs (attention scores): %.0f a step, the largest %lld bytes\n",
                static_cast<long long>(square), static_cast<long long>(square), p.square_f32_outputs,
                static_cast<long long>(p.largest_square_bytes));
  }
}
#endif

}  // namespace

void add_profile(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "count what one training step asks of a GPU, on the emulated device");
  auto a = std::make_shared<ProfileArgs>();
  cmd->add_option("config", a->config, "TOML config file (examples/configs/*.toml)")->required();
  cmd->add_option("--set", a->sets, "override a key: --set model.n_layers=2 (repeatable)");
  cmd->add_option("--device", a->device, "the device the step is profiled on: cuda (the only one so far)");
  cmd->add_flag("--emulate", a->emulate, "on the emulated CUDA backend (no GPU needed; the only mode so far)");
  cmd->add_flag("--json", a->json, "print the figures as JSON");
  cmd->add_flag("--run-kernels", a->run_kernels,
                "run the emulated kernels (reference loops: slow) instead of the null device; host time then "
                "includes them");
  cmd->add_option("--warmup", a->warmup, "steps run before counting (default 5)");
  cmd->add_option("--steps", a->steps, "steps counted (default 3)");
  cmd->callback([a] {
    if (a->device != "cuda" && a->device.rfind("cuda:", 0) != 0) {
      fail<ConfigError>("braid profile: --device {} is not profiled; only cuda is", a->device);
    }
    if (!a->emulate) {
      fail<ConfigError>("braid profile: counting a step on a real GPU is not built yet; add --emulate (the emulated "
                        "backend's counts are what a GPU would be asked for)");
    }
#if defined(BRAID_EMULATED_CUDA)
    profile(*a);
#else
    fail<ConfigError>("braid profile --emulate: this braid was built with CUDA, which leaves the emulated backend "
                      "out (both define the cuda device); run it from a build with -DBRAID_CUDA=OFF");
#endif
  });
}

}  // namespace braid::cli
