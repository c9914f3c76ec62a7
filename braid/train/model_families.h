// The model families of braid/models as `braid train` builds them: each reads
// its model.* keys into the family's typed config and builds the module tree.
// build_model (models.h) dispatches on model.name to these.
#pragma once

#include <memory>

#include "braid/base/rng.h"
#include "braid/models/gpt.h"
#include "braid/nn/module.h"
#include "braid/train/config.h"
#include "braid/train/models.h"

namespace braid::train {

// model.name = resnet (model_resnet.cc): model.depth, model.stem,
// model.zero_init_residual, model.norm (batch, sync_batch or ghost_batch;
// model.ghost_batch) over image inputs [C, H, W], C = in_channels.
// model.name = gpt (model_gpt.cc): the GptConfig of braid/models/gpt.h from
// model.d_model, n_heads, kv_heads, n_layers, context, mlp_ratio, mlp_hidden,
// norm (layer | rms), norm_eps, position, rope_theta, activation, bias,
// tie_embeddings, dropout and vocab, over token windows [T].
models::GptConfig gpt_config(const Config& config, const ModelInfo& info);
std::shared_ptr<nn::Module> build_gpt(const Config& config, const ModelInfo& info, Generator& gen);

std::shared_ptr<nn::Module> build_resnet(const Config& config, const ModelInfo& info, Generator& gen);

}  // namespace braid::train
