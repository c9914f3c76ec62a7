// CUDA kernels of embedding_bag and its two gradients (braid/ops/index.cc):
// the CPU kernels' attributes, shapes and errors, with f16 and bf16 weights
// added to f32/f64. Offsets and indices are checked on the host (one small
// copy and a wait per call), as the CPU kernel checks them; the bag starts
// then go to the device for the kernels.
#include "braid/base/error.h"
#include "braid/cuda/index_kernels.h"
#include "braid/cuda/kernels.h"
#include "braid/ops/index.h"

namespace braid::cuda {

namespace {

using op::Args;
using op::TensorMeta;
using Outputs = std::vector<Tensor>;

constexpr const char* kOp = "embedding_bag";

EmbeddingBagMode mode_of(const op::Attrs& a) { return static_cast<EmbeddingBagMode>(a.i("mode")); }

bool is_float(DType d) { return d == DType::f32 || d == DType::f64 || d == DType::f16 || d == DType::bf16; }

// The CPU's check_bag_shapes (index.cc), with the 16-bit floats accepted.
void check_bag_shapes(const TensorMeta& weight, const TensorMeta& indices, const TensorMeta& offsets,
                      const TensorMeta& psw, EmbeddingBagMode mode) {
  if (weight.shape.size() != 2) {
    fail<ValueError>("{}: weight must be [V, D], got {} (indices {}, offsets {})", kOp, to_string(weight.shape),
                     to_string(indices.shape), to_string(offsets.shape));
  }
  if (!is_float(weight.dtype)) {
    fail<ValueError>("{}: dtype {} is not supported (weight of shape {})", kOp, name(weight.dtype),
                     to_string(weight.shape));
  }
  if (indices.dtype != DType::i64 || indices.shape.size() != 1 || offsets.dtype != DType::i64 ||
      offsets.shape.size() != 1) {
    fail<ValueError>("{}: indices and offsets must be 1-D i64, got indices {} {} and offsets {} {}", kOp,
                     name(indices.dtype), to_string(indices.shape), name(offsets.dtype), to_string(offsets.shape));
  }
  if (mode != EmbeddingBagMode::sum && mode != EmbeddingBagMode::mean) {
    fail<ValueError>("{}: unknown mode {}", kOp, static_cast<int>(mode));
  }
  const int64_t n = indices.shape[0];
  if (offsets.shape[0] == 0 && n > 0) fail<ValueError>("{}: {} indices but no bags (offsets is empty)", kOp, n);
  if (!psw.absent) {
    if (mode != EmbeddingBagMode::sum) fail<ValueError>("{}: per_sample_weights need mode sum", kOp);
    if (psw.shape != Shape{n} || psw.dtype != weight.dtype) {
      fail<ValueError>("{}: per_sample_weights must be {} [{}] like indices, got {} {}", kOp, name(weight.dtype), n,
                       name(psw.dtype), to_string(psw.shape));
    }
  }
}

// Checked bags on the device, and the tensors their pointers point into.
struct DeviceBags {
  Tensor idx, psw, start;
  Bags bags;
};

// The CPU's check_bags: offsets start at 0, never decrease and stay <= n;
// indices lie in [0, V) for weight [V, D]; the bags go to `device`.
DeviceBags check_bags(const TensorMeta& weight, Device device, const Tensor& indices, const Tensor& offsets,
                      const Tensor& psw, EmbeddingBagMode mode) {
  check_bag_shapes(weight, op::meta_of(indices), op::meta_of(offsets), op::meta_of(psw), mode);
  const int64_t n = indices.numel(), B = offsets.numel(), V = weight.shape[0];
  std::vector<int64_t> start = offsets.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lo = b == 0 ? 0 : start[b - 1];
    if (b == 0 ? start[0] != 0 : (start[b] < lo || start[b] > n)) {
      fail<ValueError>("{}: offsets[{}] = {} must be {} (offsets {}, {} indices)", kOp, b, start[b],
                       b == 0 ? "0" : fmt::format("in [offsets[{}] = {}, {}]", b - 1, lo, n),
                       to_string(offsets.shape()), n);
    }
  }
  const std::vector<int64_t> idx = indices.to_vector<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    if (idx[k] < 0 || idx[k] >= V) {
      fail<IndexError>("{}: indices[{}] = {} out of range for weight {}", kOp, k, idx[k], to_string(weight.shape));
    }
  }
  start.push_back(n);
  DeviceBags d{indices.contiguous(), psw.defined() ? psw.contiguous() : Tensor{},
               Tensor::from_vector(start, {B + 1}).to(device), {}};
  d.bags = Bags{static_cast<const int64_t*>(d.idx.raw_data()), static_cast<const int64_t*>(d.start.raw_data()),
                d.psw.defined() ? d.psw.raw_data() : nullptr, B, weight.shape[1], n, mode == EmbeddingBagMode::mean};
  return d;
}

// The gradient [B, D] must match the bags.
void check_bag_grad(const char* op, const TensorMeta& g, const TensorMeta& offsets) {
  if (g.shape.size() != 2 || offsets.shape.size() != 1 || g.shape[0] != offsets.shape[0]) {
    fail<ValueError>("{}: gradient {} does not match offsets {}", op, to_string(g.shape), to_string(offsets.shape));
  }
}

Outputs embedding_bag(const Args& a) {
  const Tensor& weight = a.inputs[0];
  const DeviceBags d =
      check_bags(op::meta_of(weight), weight.device(), a.inputs[1], a.inputs[2], a.inputs[3], mode_of(a.attrs));
  const Tensor wc = weight.contiguous();
  Tensor y = empty_on(weight, {a.inputs[2].numel(), weight.size(1)}, weight.dtype());
  bag_forward(weight.dtype(), y.raw_data(), wc.raw_data(), d.bags);
  return Outputs{y};
}

Outputs embedding_bag_backward(const Args& a) {
  constexpr const char* what = "embedding_bag_backward";
  const Tensor& g = a.inputs[0];
  check_bag_grad(what, op::meta_of(g), op::meta_of(a.inputs[2]));
  const int64_t V = a.attrs.i("num_weights"), D = g.size(1);
  // Sums of 16-bit gradients gather in f32, converted at the end.
  const DType acc_dtype = g.dtype() == DType::f16 || g.dtype() == DType::bf16 ? DType::f32 : g.dtype();
  Tensor acc = Tensor::zeros({V, D}, acc_dtype, g.device());
  const DeviceBags d =
      check_bags({{V, D}, g.dtype()}, g.device(), a.inputs[1], a.inputs[2], a.inputs[3], mode_of(a.attrs));
  const Tensor gc = g.contiguous();
  bag_backward_weight(g.dtype(), acc.raw_data(), gc.raw_data(), d.bags);
  return Outputs{acc.to(g.dtype())};
}

Outputs embedding_bag_psw_backward(const Args& a) {
  constexpr const char* what = "embedding_bag_per_sample_weights_backward";
  const Tensor& g = a.inputs[0];
  const Tensor& weight = a.inputs[1];
  check_bag_grad(what, op::meta_of(g), op::meta_of(a.inputs[3]));
  if (g.dtype() != weight.dtype() || g.size(1) != weight.size(1)) {
    fail<ValueError>("{}: gradient {} {} does not match weight {} {}", what, name(g.dtype()), to_string(g.shape()),
                     name(weight.dtype()), to_string(weight.shape()));
  }
  const DeviceBags d =
      check_bags(op::meta_of(weight), weight.device(), a.inputs[2], a.inputs[3], Tensor{}, EmbeddingBagMode::sum);
  const Tensor gc = g.contiguous(), wc = weight.contiguous();
  Tensor gp = empty_on(g, {a.inputs[2].numel()}, g.dtype());
  bag_backward_psw(g.dtype(), gp.raw_data(), gc.raw_data(), wc.raw_data(), d.bags);
  return Outputs{gp};
}

}  // namespace

void install_embedding_bag_kernels(const op::KernelAdder& add) {
  add("embedding_bag", cuda_kernel(kFloats, embedding_bag));
  add("embedding_bag_backward", cuda_kernel(kFloats, embedding_bag_backward));
  add("embedding_bag_per_sample_weights_backward", cuda_kernel(kFloats, embedding_bag_psw_backward));
}

}  // namespace braid::cuda
