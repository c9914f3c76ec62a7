#include "braid/ops/dropout.h"

#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/elementwise.h"
#include "braid/tensor/cpu/loops.h"

namespace braid {

Generator& dropout_generator() {
  thread_local Generator gen(0, 0);
  return gen;
}

Tensor dropout(const Tensor& x, DropoutOptions options) {
  const double p = options.p;
  if (!(p >= 0 && p <= 1)) fail<ValueError>("dropout: p must be in [0, 1], got {} (input {})", p, to_string(x.shape()));
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64) {
    fail<ValueError>("dropout: dtype {} is not supported (input of shape {})", name(x.dtype()), to_string(x.shape()));
  }
  if (!options.training || p == 0) return x;
  Generator& gen = options.generator ? *options.generator : dropout_generator();
  const Generator::State st = gen.state();
  const int64_t n = x.numel();
  gen.set_state({st.seed, st.stream, st.offset + static_cast<uint64_t>(n)});

  // mask[i] = keep ? 1/(1-p) : 0, with word offset+i of the stream deciding keep.
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
  Tensor y = cpu::binary(cpu::Binary::mul, x, mask, "dropout");
  autograd::record("dropout", {x}, y, [mask](const Tensor& g) {
    return std::vector<Tensor>{cpu::binary(cpu::Binary::mul, g, mask, "dropout")};
  });
  return y;
}

}  // namespace braid
