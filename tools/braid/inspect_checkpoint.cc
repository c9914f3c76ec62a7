// `braid inspect checkpoint DIR [--step S] [--format table|json]
//                               [--consolidate OUT.safetensors]`
// What a run's checkpoint folder holds (braid/train/checkpoint_info.h): its
// steps, which shard lacks a step, and per step the shards, the world, the
// ZeRO stage, the optimizer, the run id and the whole model's size. Exits 1
// when a described step cannot be loaded. With --consolidate it writes the
// chosen step (default: the newest complete one) as one safetensors file
// instead.
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>

#include "braid/base/json_number.h"
#include "braid/train/checkpoint_info.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

struct Args {
  std::string dir;
  std::optional<int64_t> step;
  std::string format = "table";
  std::string consolidate;
};

std::string bytes_text(int64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < (1 << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(n) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20));
}

std::string steps_text(const std::vector<int64_t>& steps) {
  return steps.empty() ? "none" : fmt::format("{}", fmt::join(steps, ", "));
}

void print_step(const train::StepSummary& s) {
  std::printf("\nstep %lld (%s)", static_cast<long long>(s.step), s.sharded ? "sharded" : "whole model");
  if (!s.problem.empty()) {
    std::printf(": cannot be loaded: %s\n", s.problem.c_str());
    return;
  }
  std::printf(": epoch %lld, %lld batches into it\n", static_cast<long long>(s.epoch), static_cast<long long>(s.batch));
  std::printf("  run id     %s\n", s.run_id.empty() ? "(not recorded)" : s.run_id.c_str());
  std::printf("  world      %s; data world %s\n", s.mesh.empty() ? "(mesh not recorded)" : s.mesh.c_str(),
              s.data_world > 0 ? std::to_string(s.data_world).c_str() : "not recorded");
  std::printf("  ZeRO       %s\n", s.zero_stage > 0 ? fmt::format("stage {}", s.zero_stage).c_str() : "off");
  std::printf("  optimizer  %s, %lld steps\n", s.optimizer.c_str(), static_cast<long long>(s.optimizer_steps));
  std::printf("  model      %lld elements (whole model, parameters and buffers)\n",
              static_cast<long long>(s.model_elements));
  std::printf("  %-14s %10s %12s %12s  %s\n", "file", "elements", "model", "optimizer", "mesh");
  for (const train::ShardSummary& h : s.shards) {
    std::printf("  %-14s %10lld %12s %12s  %s\n", h.name.empty() ? "(whole)" : h.name.c_str(),
                static_cast<long long>(h.elements), bytes_text(h.model_bytes).c_str(),
                bytes_text(h.optimizer_bytes).c_str(), h.mesh.c_str());
  }
}

void print_table(const train::CheckpointInfo& info) {
  std::printf("%s\n", info.dir.c_str());
  std::printf("  whole-model steps: %s\n", steps_text(info.whole_steps).c_str());
  if (!info.shard_folders.empty()) {
    std::printf("  shard folders:     %s\n", fmt::format("{}", fmt::join(info.shard_folders, " ")).c_str());
    std::printf("  sharded steps:     %s\n", steps_text(info.shard_steps).c_str());
  }
  if (!info.rank_steps.empty()) {
    std::printf("  per-rank steps:    %s (train.checkpoint_format = sharded)\n", steps_text(info.rank_steps).c_str());
  }
  for (const auto& [step, lacking] : info.incomplete) {
    std::printf("  step %lld is incomplete, missing from %s\n", static_cast<long long>(step),
                fmt::format("{}", fmt::join(lacking, " ")).c_str());
  }
  for (const train::StepSummary& s : info.steps) print_step(s);
}

void describe(const Args& a) {
  const train::CheckpointInfo info = train::describe_checkpoints(a.dir, a.step);
  if (a.format == "json") {
    std::printf("%s\n", train::to_json(info).dump(2).c_str());
  } else if (info.steps.empty()) {
    std::printf("%s: no complete checkpoint\n", a.dir.c_str());
  } else {
    print_table(info);
  }
  for (const train::StepSummary& s : info.steps) {
    if (!s.problem.empty()) exit_code = 1;
  }
}

void consolidate(const Args& a) {
  const train::Checkpoint c = train::load_whole_checkpoint(a.dir, a.step);
  train::save_consolidated(a.consolidate, c);
  int64_t elements = 0;
  for (const auto& [name, t] : c.model) elements += t.numel();
  const size_t shards = c.extra.value("merged_from", nlohmann::json::array()).size();
  const nlohmann::json wrote = {{"file", a.consolidate},
                                {"step", c.step},
                                {"merged_shards", shards},
                                {"model_tensors", c.model.size()},
                                {"model_elements", elements},
                                {"optimizer_buffers", c.optimizer.tensors.size()},
                                {"bytes", std::filesystem::file_size(a.consolidate)}};
  if (a.format == "json") {
    std::printf("%s\n", wrote.dump(2).c_str());
    return;
  }
  std::printf("wrote %s: step %lld (%s), %zu model tensors (%lld elements), %zu optimizer buffers, %s\n",
              a.consolidate.c_str(), static_cast<long long>(c.step),
              shards > 0 ? fmt::format("merged from {} shards", shards).c_str() : "whole-model checkpoint",
              c.model.size(), static_cast<long long>(elements), c.optimizer.tensors.size(),
              bytes_text(static_cast<int64_t>(json_integer<uint64_t>(wrote.at("bytes")))).c_str());
}

}  // namespace

void add_inspect_checkpoint(CLI::App& inspect) {
  auto args = std::make_shared<Args>();
  auto* cmd = inspect.add_subcommand("checkpoint", "a checkpoint folder's steps, shards, world and model size");
  cmd->add_option("dir", args->dir, "the run's train.out_dir")->required();
  cmd->add_option("--step", args->step, "describe or consolidate this step only");
  cmd->add_option("--format", args->format, "table or json")->check(CLI::IsMember({"table", "json"}));
  cmd->add_option("--consolidate", args->consolidate,
                  "write the step (default: the newest complete) as one safetensors file: model tensors under "
                  "their names, optimizer buffers as optim.<i>.<buffer>");
  cmd->callback([args] { args->consolidate.empty() ? describe(*args) : consolidate(*args); });
}

}  // namespace braid::cli
