// CUDA kernel of dropout (braid/ops/dropout.cc), plus f16 and bf16. The mask
// is drawn on the device from the generator the op's attributes name, read
// and advanced on the host exactly as the CPU kernel does (state (seed,
// stream, offset), then offset += numel), so eager calls, replays and
// checkpoints keep one stream whichever device runs them. The device
// evaluates the same Philox words (dropout_kernels.cu), so f32/f64 masks and
// outputs equal the CPU's; for f16/bf16 the mask value 1 / (1 - p) is rounded
// to the dtype (the CPU has no 16-bit dropout).
#include "braid/base/error.h"
#include "braid/cuda/dropout_kernels.h"
#include "braid/cuda/kernels.h"
#include "braid/ops/dropout.h"

namespace braid::cuda {

void install_dropout_kernels(const op::KernelAdder& add) {
  add("dropout", cuda_kernel(kFloats, [](const op::Args& a) {
        const Tensor& x = a.inputs[0];
        const double p = a.attrs.f("p");
        if (!(p >= 0 && p <= 1)) {
          fail<ValueError>("dropout: p must be in [0, 1], got {} (input {})", p, to_string(x.shape()));
        }
        Generator& gen = dropout_generator_of(a.attrs);
        const Generator::State st = gen.state();
        const int64_t n = x.numel();
        gen.set_state({st.seed, st.stream, st.offset + static_cast<uint64_t>(n)});
        Tensor y = empty_on(x, x.shape(), x.dtype()), mask = empty_on(x, x.shape(), x.dtype());
        const Shape* strides[1] = {&x.strides()};
        dropout(x.dtype(), y.raw_data(), mask.raw_data(), x.raw_data(), make_indexer<1>(x.shape(), strides), n,
                {st.seed, st.stream, st.offset}, p);
        return std::vector<Tensor>{y, mask};
      }));
}

}  // namespace braid::cuda
