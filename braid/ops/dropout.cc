#include "braid/ops/dropout.h"

#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "braid/base/thread_pool.h"
#include "braid/ops/define.h"
#include "braid/ops/elementwise.h"
#include "braid/tensor/cpu/elementwise.h"
#include "braid/tensor/cpu/loops.h"

namespace braid {

Generator& dropout_generator() {
  thread_local Generator gen(0, 0);
  return gen;
}

namespace op {
namespace {

// Generators handed to dropout() in this process, by address. An attribute
// naming any other address (a graph read from a file another process wrote)
// is refused rather than followed.
struct KnownGenerators {
  std::mutex mu;
  std::unordered_set<uintptr_t> addresses;
};
KnownGenerators& known_generators() {
  static KnownGenerators k;
  return k;
}

int64_t generator_attr(Generator* gen) {
  if (gen == nullptr) return 0;
  const auto address = reinterpret_cast<uintptr_t>(gen);
  KnownGenerators& k = known_generators();
  std::lock_guard<std::mutex> lock(k.mu);
  k.addresses.insert(address);
  return static_cast<int64_t>(address);
}

// The generator an attribute names: its address, or 0 for the calling
// thread's dropout_generator() (kernels run on the thread that calls).
Generator& generator_of(const Attrs& a) {
  const int64_t attr = a.has("generator") ? a.i("generator") : 0;
  if (attr == 0) return dropout_generator();
  const auto address = static_cast<uintptr_t>(attr);
  KnownGenerators& k = known_generators();
  std::lock_guard<std::mutex> lock(k.mu);
  if (!k.addresses.count(address)) {
    fail<ValueError>("dropout: attribute generator={} names no generator dropout() was given in this process", attr);
  }
  return *reinterpret_cast<Generator*>(address);
}

// mask[i] = keep ? 1/(1-p) : 0, with word offset+i of the generator's stream
// deciding keep; the generator moves on by x.numel() words.
Tensor draw_mask(const Tensor& x, double p, Generator& gen) {
  const Generator::State st = gen.state();
  const int64_t n = x.numel();
  gen.set_state({st.seed, st.stream, st.offset + static_cast<uint64_t>(n)});
  Tensor mask = Tensor::empty(x.shape(), x.dtype());
  const double scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;
  visit_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      T* m = mask.data<T>();
      parallel_for(0, n, cpu::kParallelGrain, [&](int64_t lo, int64_t hi) {
        // One Philox block serves 4 consecutive words.
        uint64_t block_id = UINT64_MAX;
        Philox4 block{};
        for (int64_t i = lo; i < hi; ++i) {
          const uint64_t word = st.offset + static_cast<uint64_t>(i);
          if (word / 4 != block_id) {
            block_id = word / 4;
            block = philox(st.seed, st.stream, block_id);
          }
          const uint32_t bits = block[word % 4];
          const float u = static_cast<float>(bits >> 8) * 0x1.0p-24f;  // as Generator::uniform()
          m[i] = u >= p ? static_cast<T>(scale) : T{0};
        }
      });
    }
  });
  return mask;
}

}  // namespace

void define_dropout_ops(const Definer& define) {
  // Attributes p and generator (see generator_of). Output 1 is the mask
  // (0 or 1/(1-p) per element), kept for the backward: g * mask.
  define({.name = "dropout", .family = "dropout", .inputs = 1, .outputs = 2, .effect = Effect::random,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) { return Metas{in[0], in[0]}; },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& x = a.inputs[0];
            const double p = a.attrs.f("p");
            if (!(p >= 0 && p <= 1)) fail<ValueError>("dropout: p must be in [0, 1], got {} (input {})", p, to_string(x.shape()));
            Tensor mask = draw_mask(x, p, generator_of(a.attrs));
            return Outputs{cpu::binary(cpu::Binary::mul, x, mask, "dropout"), mask};
          })},
          .backward = [](const GradArgs& g) { return Grads{mul(g.grad, g.outputs[1])}; },
          .save_outputs = 0b10,
          // One draw and one multiply an element; the mask is written too.
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{2 * static_cast<double>(numel(in[0].shape)), bytes_of(in[0]) + bytes_of(out[0]) + bytes_of(out[1]), 1};
          }});
}

}  // namespace op

Generator& dropout_generator_of(const op::Attrs& attrs) { return op::generator_of(attrs); }
int64_t dropout_generator_attr(Generator* gen) { return op::generator_attr(gen); }

Tensor dropout(const Tensor& x, DropoutOptions options) {
  const double p = options.p;
  if (!(p >= 0 && p <= 1)) fail<ValueError>("dropout: p must be in [0, 1], got {} (input {})", p, to_string(x.shape()));
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64) {
    fail<ValueError>("dropout: dtype {} is not supported (input of shape {})", name(x.dtype()), to_string(x.shape()));
  }
  if (!options.training || p == 0) return x;
  return op::call1(BRAID_OP("dropout"), {x}, {{"p", p}, {"generator", op::generator_attr(options.generator)}});
}

}  // namespace braid
