// Training checkpoints: a safetensors file plus a JSON sidecar per step.
//
//   <dir>/ckpt-00001200.safetensors   model tensors "model.<name>" and
//                                     optimizer buffers "optim.<i>.<buffer>",
//                                     each data rank's plan state "plan.r<rank>.<name>"
//                                     (a codec's error-feedback memory)
//                                     (CRC-32 of the data in its metadata)
//   <dir>/ckpt-00001200.json          {"step", "epoch", "batch", "rng",
//                                      "optimizer" (scalars), "config",
//                                      "tensors_crc32", "extra",
//                                      "sidecar_crc32"}
//
// Both are written atomically (temp + fsync + rename), tensors first: the
// sidecar is the commit record, so a crash mid-write leaves the previous
// checkpoint the latest complete one. The sidecar repeats the tensor file's
// CRC, so a sidecar paired with another step's tensors is refused too; its
// own CRC (of its compact JSON without that field) and the step in its name
// refuse a sidecar that was altered or renamed.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "braid/base/rng.h"
#include "braid/nn/module.h"
#include "braid/optim/optimizer.h"

namespace braid::train {

struct Checkpoint {
  nn::NamedTensors model;
  optim::OptimizerState optimizer;
  // Per data rank, besides model and optimizer (GradSync::rank_state); a
  // resume under another plan starts it afresh.
  nn::NamedTensors plan;
  int64_t step = 0;   // optimizer steps taken
  int64_t epoch = 0;  // epoch in progress
  int64_t batch = 0;  // batches of `epoch` already consumed
  Generator::State rng{0, 0, 0};  // the trainer's generator (dropout)
  nlohmann::json config;          // Config::to_json() of the run
  nlohmann::json extra;           // free-form (last loss, metrics)
};

// The safetensors name of a dtype ("F32") and back; IoError naming `what`
// for a name braid does not know.
std::string safetensors_dtype(DType t);
DType dtype_from_safetensors(const std::string& name, const std::string& what);

// Paths of the checkpoint for `step` in `dir`, without extension.
std::string checkpoint_stem(const std::string& dir, int64_t step);

// Writes the checkpoint; IoError when the folder cannot be written.
void save_checkpoint(const std::string& dir, const Checkpoint& ckpt);

// Reads and verifies the checkpoint with stem `stem` ("<dir>/ckpt-00001200").
// IoError naming the file when either file is missing, truncated or altered.
Checkpoint load_checkpoint(const std::string& stem);

// The parsed sidecar of the checkpoint with stem `stem`, without reading or
// verifying its tensors (for looking across many shards cheaply). IoError
// naming the file when it is missing, not JSON, or fails its own CRC.
nlohmann::json read_checkpoint_sidecar(const std::string& stem);

// Writes the whole model and its optimizer state as ONE safetensors file for
// tools that know nothing of braid's checkpoints: model tensors under their
// own names ("0.weight", as PyTorch's state_dict names them), optimizer
// buffers as "optim.<i>.<buffer>"; the metadata holds format
// "braid-consolidated", step, epoch, batch, run_id (when extra has one), and
// the optimizer scalars and config as JSON text. Atomic, like a checkpoint.
// ValueError when a model tensor's name starts with "optim.".
void save_consolidated(const std::string& path, const Checkpoint& ckpt);

// Steps of the complete-looking checkpoints (sidecar present) in `dir`, ascending.
std::vector<int64_t> list_checkpoints(const std::string& dir);

// The newest checkpoint in `dir` that loads and verifies. A newer one that
// fails is reported through `skipped` ("<file>: <reason>") and passed over.
// nullopt when there is none.
std::optional<Checkpoint> load_latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped = nullptr);

// Deletes all but the newest `keep` checkpoints (keep >= 1).
void prune_checkpoints(const std::string& dir, int keep);

}  // namespace braid::train
