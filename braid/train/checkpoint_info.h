// A checkpoint folder seen from the outside (`braid inspect checkpoint`):
// which steps it holds, what each step's files hold and which run and world
// wrote them, and the whole model of one step as a single process loads it.
//
// Every described step is read and verified in full (CRC of each tensor
// file), so a broken step shows up with the file that broke it; on a large
// model, ask for one step.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "braid/train/checkpoint.h"

namespace braid::train {

// One tensor file of a step: the whole model's, or one shard's.
struct ShardSummary {
  std::string name{};           // folder, "shard-t0-p1"; "" for a whole-model checkpoint
  std::string file{};           // its .safetensors path
  std::string mesh{};           // as its trainer wrote it; "" when not recorded
  int64_t elements = 0;         // of the model tensors held here (parameters and buffers)
  int64_t model_bytes = 0;      // bytes of those tensors
  int64_t optimizer_bytes = 0;  // bytes of the optimizer buffers held here
};

struct StepSummary {
  int64_t step = 0;
  bool sharded = false;
  std::string problem{};  // why the step cannot be loaded (the error, naming the file); "" when it verified
  // The rest is filled only when `problem` is empty.
  int64_t epoch = 0, batch = 0;        // epoch in progress, batches of it consumed
  std::vector<ShardSummary> shards{};  // one for a whole-model checkpoint
  std::string mesh{};                  // the world's mesh ("data 1 x tensor 2 x pipeline 2"); "" when not recorded
  int64_t data_world = 0;              // replicas on the data axis; 0 when not recorded
  int zero_stage = 0;                  // extra.zero.stage; 0: no ZeRO
  std::string optimizer{};             // its name
  int64_t optimizer_steps = 0;
  std::string run_id{};                // "" when not recorded
  int64_t model_elements = 0;          // the whole model's, each element once
};

struct CheckpointInfo {
  std::string dir{};
  std::vector<std::string> shard_folders{};                  // empty when no sharded run wrote here
  std::vector<int64_t> whole_steps{};                        // whole-model checkpoints in `dir`, ascending
  std::vector<int64_t> shard_steps{};                        // steps a whole grid of shard folders has (shards_of_step)
  std::map<int64_t, std::vector<std::string>> incomplete{};  // a step some shards have -> the folders of its grid lacking it
  // Steps written with train.checkpoint_format = sharded that have a manifest
  // (checkpoint_manifest.h), ascending; described with one ShardSummary per rank.
  std::vector<int64_t> rank_steps{};
  // The described steps, ascending; a step's whole-model checkpoint before its shards.
  std::vector<StepSummary> steps{};
};

// Lists `dir`'s checkpoints and describes every complete step, or only `step`.
// A step that fails to load is described by its `problem`, not thrown. IoError
// when `dir` is not a folder or holds no complete checkpoint of `step`.
CheckpointInfo describe_checkpoints(const std::string& dir, std::optional<int64_t> step = std::nullopt);

nlohmann::json to_json(const CheckpointInfo& info);

// The whole model and optimizer state of `step` (nullopt: the newest complete
// step) as one process would load them: the whole-model checkpoint of that
// step if `dir` has one, else its shards merged in the order the shards
// recorded (shard_param_order). IoError naming the file that is missing,
// broken or from another run.
Checkpoint load_whole_checkpoint(const std::string& dir, std::optional<int64_t> step = std::nullopt);

}  // namespace braid::train
