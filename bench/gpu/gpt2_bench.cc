// The yardstick of issue 52: GPT-2 124M (12 layers x 768, 12 heads, context
// 1024, vocab 50304, learned positions, layer norm, GELU (tanh), tied head)
// trained by braid with AdamW under bf16 autocast on synthetic tokens drawn
// from a seeded Philox stream, batch 16 x 1024. Prints tokens/s, the step
// time, MFU by the 6N + attention formula (models::training_flops_per_token)
// and by the FLOPs the step's op calls count (the ops' cost rules), and peak
// memory, as one JSON line. bench/gpu/gpt2_torch.py runs the same model in
// PyTorch; bench/gpu/window.sh runs the two alternately on a lent GPU.
//
//   build/bin/gpt2_bench [--device cuda] [--small] [--steps 20] [--warmup 5]
//                        [--layers L --dim D --heads H --context T --vocab V --batch B]
//
// --small is a shape the CPU trains in seconds (2 x 64, context 64, vocab
// 512, batch 2), so the program is tested where there is no GPU. Data loading
// is not measured: a few batches are made on the device before timing, as
// gpt2_torch.py does. The loss is read once, after the timed steps (the read
// waits for the device, which ends the timing).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/autograd/engine.h"
#include "braid/braid.h"
#include "braid/models/gpt.h"
#include "braid/ops/autocast.h"
#include "braid/ops/registry.h"
#include "braid/tensor/allocator.h"
#include "braid/train/flops.h"

#if defined(BRAID_GPT2_BENCH_CUDA)
#include <cuda_runtime.h>
#endif

namespace {

using namespace braid;

struct Options {
  models::GptConfig model{.vocab = 50304, .context = 1024, .layers = 12, .heads = 12, .dim = 768};
  int64_t batch = 16;
  int64_t steps = 20, warmup = 5;
  std::string device = "cuda";
  std::string precision = "bf16";
  double peak_tflops = 0;  // 0: H100/H200 SXM dense for the precision on a GPU, measured on the CPU
  uint64_t seed = 1234;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "gpt2_bench: %s\nusage: gpt2_bench [--device cuda|cpu] [--precision bf16|f32] [--small] [--steps N] "
               "[--warmup N] [--layers L] [--dim D] [--heads H] [--context T] [--vocab V] [--batch B] "
               "[--peak-tflops F] [--seed S]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    auto integer = [&] { return std::stoll(value()); };
    if (a == "--small") {
      o.model.layers = 2, o.model.dim = 64, o.model.heads = 2, o.model.context = 64, o.model.vocab = 512;
      o.batch = 2;
    } else if (a == "--device") {
      o.device = value();
    } else if (a == "--precision") {
      o.precision = value();
    } else if (a == "--steps") {
      o.steps = integer();
    } else if (a == "--warmup") {
      o.warmup = integer();
    } else if (a == "--layers") {
      o.model.layers = integer();
    } else if (a == "--dim") {
      o.model.dim = integer();
    } else if (a == "--heads") {
      o.model.heads = integer();
    } else if (a == "--context") {
      o.model.context = integer();
    } else if (a == "--vocab") {
      o.model.vocab = integer();
    } else if (a == "--batch") {
      o.batch = integer();
    } else if (a == "--peak-tflops") {
      o.peak_tflops = std::stod(value());
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(integer());
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.steps < 1 || o.warmup < 0 || o.batch < 1) usage("--steps >= 1, --warmup >= 0 and --batch >= 1");
  if (o.precision != "bf16" && o.precision != "f32") usage("--precision is bf16 or f32");
  return o;
}

// Sums the FLOPs of every op call (forward, backward, update) by the ops' cost rules.
class FlopCounter final : public op::CallObserver {
 public:
  void on_call(const op::OpDef& op, const op::Attrs& attrs, std::span<const Tensor> inputs,
               std::span<const Tensor> outputs) override {
    std::vector<op::TensorMeta> in, out;
    for (const Tensor& t : inputs) in.push_back(op::meta_of(t));
    for (const Tensor& t : outputs) out.push_back(op::meta_of(t));
    flops += op::cost_of(op, in, out, attrs).flops;
  }
  double flops = 0;
};

// Tokens [B, T + 1] from the seeded stream: inputs are the first T, targets the last T.
struct Batch {
  Tensor input, target;
};

Batch synthetic_batch(const Options& o, Generator& gen, Device device) {
  const int64_t b = o.batch, t = o.model.context;
  std::vector<int64_t> ids(static_cast<size_t>(b * (t + 1)));
  for (int64_t& id : ids) id = static_cast<int64_t>(gen.below(static_cast<uint64_t>(o.model.vocab)));
  std::vector<int64_t> x, y;
  for (int64_t r = 0; r < b; ++r) {
    x.insert(x.end(), ids.begin() + r * (t + 1), ids.begin() + r * (t + 1) + t);
    y.insert(y.end(), ids.begin() + r * (t + 1) + 1, ids.begin() + (r + 1) * (t + 1));
  }
  return {Tensor::from_vector(x, {b, t}).to(device), Tensor::from_vector(y, {b * t}).to(device)};
}

// Bytes the process holds on the device at the end (the caching allocator's
// reserve: its high-water mark, since it gives nothing back); on the CPU the
// host allocator's peak of tensors in use.
int64_t peak_bytes(Device device) {
#if defined(BRAID_GPT2_BENCH_CUDA)
  if (device.is_cuda()) {
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return -1;
    return static_cast<int64_t>(total - free_bytes);
  }
#endif
  if (device.is_cpu()) return static_cast<int64_t>(CachingAllocator::host().stats().peak_bytes_in_use);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    const Device device = parse_device(o.device);
    if (!available(device)) {
      std::fprintf(stderr, "gpt2_bench: device %s is not available here (no GPU, or braid built without CUDA)\n",
                   o.device.c_str());
      return 3;
    }
    const DType precision = o.precision == "bf16" ? DType::bf16 : DType::f32;
    Generator init(o.seed, 0), data(o.seed, 1);
    auto model = models::gpt(o.model, init);
    model->to(device);
    std::vector<Tensor> params = model->parameters();
    optim::AdamW adamw(params, {.lr = 6e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
    std::vector<Batch> batches;
    for (int i = 0; i < 4; ++i) batches.push_back(synthetic_batch(o, data, device));

    Tensor loss;
    auto step = [&](int64_t i) {
      const Batch& b = batches[static_cast<size_t>(i) % batches.size()];
      adamw.zero_grad(/*set_to_none=*/false);
      {
        Autocast autocast(precision);
        const Tensor logits = model->forward(b.input);  // [B, T, V]
        loss = cross_entropy(reshape(logits, {o.batch * o.model.context, o.model.vocab}), b.target);
        backward(loss);
      }
      optim::clip_grad_norm(params, 1.0);
      adamw.step();
    };
    for (int64_t i = 0; i < o.warmup; ++i) step(i);
    const double first_loss = o.warmup > 0 ? loss.item() : 0;
    if (device.is_cpu()) CachingAllocator::host().reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < o.steps; ++i) step(o.warmup + i);
    const double last_loss = loss.item();  // waits for the device: the timed steps are done
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // One more step, observed, for the FLOPs its op calls count.
    FlopCounter counted;
    {
      op::ObserveCalls observe(&counted);
      step(o.warmup + o.steps);
    }
    (void)loss.item();

    const int64_t parameters = model->num_parameters();
    const double tokens_per_step = static_cast<double>(o.batch * o.model.context);
    const double tokens_per_s = tokens_per_step * static_cast<double>(o.steps) / seconds;
    const double formula_per_token = models::training_flops_per_token(o.model, parameters);
    double peak = o.peak_tflops * 1e12;
    std::string peak_source = "--peak-tflops";
    if (peak <= 0 && device.is_cuda()) {
      peak = precision == DType::bf16 ? 989.4e12 : 66.9e12;  // H100/H200 SXM dense (NVIDIA's data sheet)
      peak_source = "H100/H200 SXM dense";
    } else if (peak <= 0) {
      // The CPU's f32 product rate: its bf16 products exist only under
      // autocast (from f32 operands), which the measurement does not use.
      peak = train::measured_peak_flops(device, DType::f32);
      peak_source = "measured f32 products";
    }
    nlohmann::json j = {
        {"framework", "braid"},
        {"mode", "eager"},
        {"device", o.device},
        {"precision", o.precision},
        {"layers", o.model.layers}, {"dim", o.model.dim}, {"heads", o.model.heads},
        {"context", o.model.context}, {"vocab", o.model.vocab}, {"batch", o.batch},
        {"parameters", parameters},
        {"steps", o.steps}, {"warmup", o.warmup},
        {"step_ms", 1e3 * seconds / static_cast<double>(o.steps)},
        {"tokens_per_s", tokens_per_s},
        {"flops_per_token_formula", formula_per_token},
        {"flops_per_token_counted", counted.flops / tokens_per_step},
        {"peak_tflops", peak / 1e12}, {"peak_source", peak_source},
        {"mfu_formula", tokens_per_s * formula_per_token / peak},
        {"mfu_counted", tokens_per_s * counted.flops / tokens_per_step / peak},
        {"peak_memory_bytes", peak_bytes(device)},
        {"loss_first", first_loss}, {"loss_last", last_loss},
    };
    std::printf("%s\n", j.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt2_bench: %s\n", e.what());
    return 1;
  }
}
