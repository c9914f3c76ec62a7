// Trained language models read back: for `braid generate`, `braid eval` and
// `braid export`, and as the start of a run (train.init). A model is either
// a Hugging Face folder (config.json + safetensors, braid/models/hf_checkpoint.h)
// or a braid checkpoint: a run's out_dir (its newest complete step, whole or
// sharded) or one step's ckpt-N.safetensors / .json, rebuilt from the config
// its sidecar recorded.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "braid/models/gpt.h"
#include "braid/models/hf_checkpoint.h"
#include "braid/nn/sequential.h"
#include "braid/train/config.h"
#include "braid/train/models.h"

namespace braid::train {

struct Pretrained {
  std::shared_ptr<nn::Sequential> model;    // eval mode, on the host
  std::optional<models::GptConfig> gpt;     // Hugging Face folders and model.name = gpt: what export writes
  int64_t context = 0;                      // the most positions it reads
  int64_t vocab = 0;
  std::string description;                  // "Hugging Face llama folder X" / "braid checkpoint X, step N"
  std::optional<models::HfArch> hf_arch;    // a Hugging Face folder's
  std::optional<int64_t> eos;               // the end-of-text id config.json names
  // A tokenizer that belongs with it: the folder's tokenizer.json (or
  // vocab.json + merges.txt); for a braid run, its out_dir's, else the folder
  // of the token shards it trained on (data.path). "" when none.
  std::string tokenizer;
};

// A language model (model.name = gpt or char_transformer for braid runs).
// IoError when `path` is neither kind or its files are broken; ConfigError
// for a braid checkpoint of another model.
Pretrained load_pretrained(const std::string& path);

// The folder or file at `path` holds a tokenizer (tokenizer.json, or
// vocab.json + merges.txt): its path for text::load_tokenizer, else "".
std::string tokenizer_at(const std::string& path);

// train.init: copies the weights at `path` into `model` (the run's model as
// build_model made it from `c` and `info`, before a plan shards it). A
// Hugging Face folder initialises model.name = gpt; a braid checkpoint any
// model of the same layout. ConfigError naming both values when the
// checkpoint's gpt differs from the run's model.* keys in what no shape
// shows (heads, norm_eps, rope_theta, activation); ValueError naming the
// tensor and both shapes when a shape differs, or a tensor one side lacks.
void init_model(nn::Module& model, const std::string& path, const Config& c, const ModelInfo& info);

}  // namespace braid::train
