// Model FLOPs utilisation (MFU) of sequence models: the FLOPs a model needs
// per trained token, and the peak FLOP/s of the device they are divided by.
//
//   MFU = tokens/s (the job's) x training_flops_per_token / (peak x devices)
//
// "Model" FLOPs count what the model needs, not what the run executes:
// recomputed activations, padding and communication do not count, so MFU
// compares runs and frameworks on the same footing (PaLM, Chowdhery et al.
// 2022, appendix B; nanoGPT's estimate_mfu).
#pragma once

#include <cstdint>
#include <optional>

#include "braid/nn/module.h"
#include "braid/tensor/device.h"
#include "braid/tensor/dtype.h"
#include "braid/train/config.h"

namespace braid::train {

// Training FLOPs of one token, forward and backward: 6 N for the N
// parameters every token's products use (2 N forward, 4 N backward), plus
// 12 L T d for attention's scores and weighted values (L layers over a
// context of T tokens, width d = heads x head dimension), which no
// parameter counts. An attention-free model has layers = 0.
struct TokenFlops {
  int64_t parameters = 0;  // N, the whole model's (every shard, every stage)
  int64_t layers = 0;      // L, attention layers
  int64_t context = 0;     // T, tokens each position may attend over
  int64_t width = 0;       // d
  double per_token() const {
    return 6.0 * static_cast<double>(parameters) +
           12.0 * static_cast<double>(layers) * static_cast<double>(context) * static_cast<double>(width);
  }
};

// The token FLOPs of the model `config` builds, `model` being the whole
// model as built (before a plan shards it) and `context` the tokens per
// example. N is every parameter of `model`; the attention term comes from
// the model family's keys: char_transformer's and gpt's model.n_layers x
// model.d_model. A model family with attention states its (L, d) here, in
// flops.cc, reading the keys its builder reads (and no others: a key read
// here counts as used). Families without attention get L = 0.
TokenFlops model_token_flops(const Config& config, const nn::Module& model, int64_t context);

// Peak FLOP/s of one `device` for products in `precision` (f32, or bf16/f16
// products with f32 results), measured: square matrix products through the
// op registry on this process's intra-op threads, the best of a few after a
// warm-up, about a quarter of a second. Cached per (device, precision,
// threads) for the life of the process; `refresh` measures again and keeps
// the better figure (a peak measured while other work shared the cores is
// low, and would put MFU above 100% once they go quiet). A datasheet figure
// is what GPU MFU is usually quoted against; set train.peak_tflops to use one.
double measured_peak_flops(Device device, DType precision, bool refresh = false);

}  // namespace braid::train
