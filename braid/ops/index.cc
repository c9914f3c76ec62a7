#include "braid/ops/index.h"

#include <algorithm>
#include <cmath>

#include "braid/base/thread_pool.h"
#include "braid/ops/define.h"
#include "braid/ops/shape.h"
#include "braid/tensor/cpu/index.h"
#include "braid/tensor/cpu/loops.h"

namespace braid {

namespace op {
namespace {

// ---- embedding_bag's kernels ----

// embedding_bag's inputs, checked and contiguous. Bag b covers positions
// [start[b], start[b + 1]) of idx (and psw, when defined).
struct Bags {
  Tensor idx;                  // i64 [n], every value in [0, V)
  Tensor psw;                  // weight's dtype [n], or undefined
  std::vector<int64_t> start;  // [B + 1], start[B] == n
  EmbeddingBagMode mode;
  int64_t size(int64_t b) const { return start[b + 1] - start[b]; }
  // Factor of position k (in bag b) in its bag's output.
  template <class T>
  T scale(const T* psw_p, int64_t b, int64_t k) const {
    if (mode == EmbeddingBagMode::mean) return T(1) / static_cast<T>(size(b));
    return psw_p != nullptr ? psw_p[k] : T(1);
  }
};

EmbeddingBagMode mode_of(const Attrs& a) { return static_cast<EmbeddingBagMode>(a.i("mode")); }

// What embedding_bag can check from shapes and dtypes (the meta device too):
// weight [V, D] floating, indices and offsets 1-D i64, per_sample_weights
// [n] of weight's dtype with mode sum only.
void check_bag_shapes(const TensorMeta& weight, const TensorMeta& indices, const TensorMeta& offsets,
                      const TensorMeta& psw, EmbeddingBagMode mode) {
  constexpr const char* op = "embedding_bag";
  if (weight.shape.size() != 2) {
    fail<ValueError>("{}: weight must be [V, D], got {} (indices {}, offsets {})", op, to_string(weight.shape),
                     to_string(indices.shape), to_string(offsets.shape));
  }
  if (weight.dtype != DType::f32 && weight.dtype != DType::f64) {
    fail<ValueError>("{}: dtype {} is not supported (weight of shape {})", op, name(weight.dtype), to_string(weight.shape));
  }
  if (indices.dtype != DType::i64 || indices.shape.size() != 1 || offsets.dtype != DType::i64 || offsets.shape.size() != 1) {
    fail<ValueError>("{}: indices and offsets must be 1-D i64, got indices {} {} and offsets {} {}", op,
                     name(indices.dtype), to_string(indices.shape), name(offsets.dtype), to_string(offsets.shape));
  }
  if (mode != EmbeddingBagMode::sum && mode != EmbeddingBagMode::mean) {
    fail<ValueError>("{}: unknown mode {}", op, static_cast<int>(mode));
  }
  const int64_t n = indices.shape[0];
  if (offsets.shape[0] == 0 && n > 0) fail<ValueError>("{}: {} indices but no bags (offsets is empty)", op, n);
  if (!psw.absent) {
    if (mode != EmbeddingBagMode::sum) fail<ValueError>("{}: per_sample_weights need mode sum", op);
    if (psw.shape != Shape{n} || psw.dtype != weight.dtype) {
      fail<ValueError>("{}: per_sample_weights must be {} [{}] like indices, got {} {}", op, name(weight.dtype), n,
                       name(psw.dtype), to_string(psw.shape));
    }
  }
}

// The values' checks: offsets start at 0, never decrease and stay <= n;
// indices lie in [0, V).
Bags check_bags(const Tensor& weight, const Tensor& indices, const Tensor& offsets, const Tensor& psw,
                EmbeddingBagMode mode) {
  constexpr const char* op = "embedding_bag";
  check_bag_shapes(meta_of(weight), meta_of(indices), meta_of(offsets), meta_of(psw), mode);
  const int64_t n = indices.numel(), B = offsets.numel(), V = weight.size(0);
  Bags bags{indices.contiguous(), psw.defined() ? psw.contiguous() : Tensor{}, {}, mode};
  const Tensor oc = offsets.contiguous();
  const int64_t* o = oc.data<int64_t>();
  bags.start.assign(o, o + B);
  bags.start.push_back(n);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lo = b == 0 ? 0 : o[b - 1];
    if (b == 0 ? o[0] != 0 : (o[b] < lo || o[b] > n)) {
      fail<ValueError>("{}: offsets[{}] = {} must be {} (offsets {}, {} indices)", op, b, o[b],
                       b == 0 ? "0" : fmt::format("in [offsets[{}] = {}, {}]", b - 1, lo, n), to_string(offsets.shape()),
                       n);
    }
  }
  const int64_t* ip = bags.idx.data<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    if (ip[k] < 0 || ip[k] >= V) {
      fail<IndexError>("{}: indices[{}] = {} out of range for weight {}", op, k, ip[k], to_string(weight.shape()));
    }
  }
  return bags;
}

// Runs fn with float or double for an f32/f64 tensor (kernels declare which).
template <class Fn>
void float_or_double(DType dtype, Fn&& fn) {
  if (dtype == DType::f32) return fn(float{});
  if (dtype == DType::f64) return fn(double{});
  fail<ValueError>("embedding_bag: dtype {} is not supported", name(dtype));
}

// out [B, D] = the pooled rows; bags split over the pool.
template <class T>
void bag_forward(const Bags& bags, const T* w, int64_t D, T* out) {
  const int64_t B = static_cast<int64_t>(bags.start.size()) - 1, n = bags.start.back();
  const int64_t* ip = bags.idx.data<int64_t>();
  const T* pp = bags.psw.defined() ? bags.psw.data<T>() : nullptr;
  const int64_t work_per_bag = std::max<int64_t>(1, (n / std::max<int64_t>(B, 1) + 1) * D);
  parallel_for(0, B, std::max<int64_t>(1, cpu::kParallelGrain / work_per_bag), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      T* y = out + b * D;
      std::fill(y, y + D, T(0));
      for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
        const T s = bags.scale(pp, b, k);
        const T* row = w + ip[k] * D;
        for (int64_t j = 0; j < D; ++j) y[j] += s * row[j];
      }
    }
  });
}

// gw [V, D] += scale_k * g[bag of k] at row indices[k]. Tasks own disjoint
// column blocks of gw (as in cpu::index_add_into), so repeated indices never
// race and the sum order is fixed.
template <class T>
void bag_backward_weight(const Bags& bags, const T* g, int64_t D, T* gw) {
  constexpr int64_t kBlock = 512;
  const int64_t B = static_cast<int64_t>(bags.start.size()) - 1, n = bags.start.back();
  const int64_t* ip = bags.idx.data<int64_t>();
  const T* pp = bags.psw.defined() ? bags.psw.data<T>() : nullptr;
  const int64_t blocks = (D + kBlock - 1) / kBlock;
  parallel_for(0, blocks, std::max<int64_t>(1, cpu::kParallelGrain / (std::max<int64_t>(n, 1) * kBlock)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t t = lo; t < hi; ++t) {
                   const int64_t j0 = t * kBlock, j1 = std::min(D, j0 + kBlock);
                   for (int64_t b = 0; b < B; ++b) {
                     const T* gb = g + b * D;
                     for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
                       const T s = bags.scale(pp, b, k);
                       T* row = gw + ip[k] * D;
                       for (int64_t j = j0; j < j1; ++j) row[j] += s * gb[j];
                     }
                   }
                 }
               });
}

// gpsw[k] = dot(g[bag of k], w[indices[k]]); bags split over the pool.
template <class T>
void bag_backward_psw(const Bags& bags, const T* g, const T* w, int64_t D, T* gp) {
  const int64_t B = static_cast<int64_t>(bags.start.size()) - 1, n = bags.start.back();
  const int64_t* ip = bags.idx.data<int64_t>();
  const int64_t work_per_bag = std::max<int64_t>(1, (n / std::max<int64_t>(B, 1) + 1) * D);
  parallel_for(0, B, std::max<int64_t>(1, cpu::kParallelGrain / work_per_bag), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
        const T* row = w + ip[k] * D;
        T acc = T(0);
        for (int64_t j = 0; j < D; ++j) acc += g[b * D + j] * row[j];
        gp[k] = acc;
      }
    }
  });
}

// The gradient [B, D] must match the bags.
void check_bag_grad(const char* op, const TensorMeta& g, const TensorMeta& offsets) {
  if (g.shape.size() != 2 || offsets.shape.size() != 1 || g.shape[0] != offsets.shape[0]) {
    fail<ValueError>("{}: gradient {} does not match offsets {}", op, to_string(g.shape), to_string(offsets.shape));
  }
}

// ---- inference ----

// gather: index has x's ndim and x's sizes in every dim but `dim`; the
// result has index's shape. (scatter-add into `shape`: the same test.)
void check_gather(const char* op, const Shape& x, int64_t dim, const TensorMeta& index) {
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(x.size()), op);
  bool ok = index.shape.size() == x.size();
  for (int64_t i = 0; ok && i < static_cast<int64_t>(x.size()); ++i) ok = i == d || index.shape[i] == x[i];
  if (!ok) fail<ValueError>("{}: index {} must match input {} in every dim but {}", op, to_string(index.shape), to_string(x), dim);
  if (index.dtype != DType::i64) fail<ValueError>("{}: index must be i64, got {} {}", op, name(index.dtype), to_string(index.shape));
}

// index_select: a 1-D i64 index; the result is x with size(dim) = index.numel().
Shape selected_shape(const char* op, const Shape& x, int64_t dim, const TensorMeta& index) {
  if (index.shape.size() != 1 || index.dtype != DType::i64) {
    fail<ValueError>("{}: index must be 1-D i64, got {} {} (input {})", op, name(index.dtype), to_string(index.shape),
                     to_string(x));
  }
  if (x.empty()) fail<ValueError>("{}: cannot select from a 0-d tensor", op);
  Shape out = x;
  out[wrap_dim(dim, static_cast<int64_t>(x.size()), op)] = index.shape[0];
  return out;
}

// A gather or scatter moves each element of the smaller side once, with one
// index read per element.
Cost index_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
  double bytes = 0;
  for (const TensorMeta& t : in) bytes += bytes_of(t);
  return Cost{0, bytes + bytes_of(out[0]), 1};
}
// A scatter-add: one add per source element; the elements that meet at one
// destination (on average) sum in a tree.
Cost scatter_cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& a) {
  Cost c = index_cost(in, out, a);
  const double n = static_cast<double>(numel(in[0].shape)), m = static_cast<double>(numel(out[0].shape));
  c.flops = n;
  c.depth = log2_depth(m > 0 ? std::ceil(n / m) : 1);
  return c;
}

}  // namespace

void define_index_ops(const Definer& define) {
  // Rows of weight [V, D] at i64 indices of any shape -> [*indices, D].
  define({.name = "embedding", .family = "index", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            if (in[0].shape.size() != 2) {
              fail<ValueError>("embedding: weight must be [V, D], got {} (indices {})", to_string(in[0].shape),
                               to_string(in[1].shape));
            }
            if (in[1].dtype != DType::i64) fail<ValueError>("embedding: indices must be i64, got {}", name(in[1].dtype));
            Shape shape = in[1].shape;
            shape.push_back(in[0].shape[1]);
            return Metas{{shape, in[0].dtype}};
          },
          .kernels = {cpu_kernel({}, [](const Args& a) {
            const Tensor& weight = a.inputs[0];
            const Tensor& indices = a.inputs[1];
            if (weight.ndim() != 2) {
              fail<ValueError>("embedding: weight must be [V, D], got {} (indices {})", to_string(weight.shape()),
                               to_string(indices.shape()));
            }
            const Tensor ic = indices.contiguous();
            const Tensor rows = cpu::index_select(weight, 0, ic.as_strided({ic.numel()}, {1}, ic.offset()), "embedding");
            Shape shape = indices.shape();
            shape.push_back(weight.size(1));
            return Outputs{rows.as_strided(shape, contiguous_strides(shape), 0)};
          })},
          .backward = [](const GradArgs& g) {
            const Shape& w = g.input_meta[0].shape;
            const int64_t n = numel(g.input_meta[1].shape);
            return Grads{index_select_backward(reshape(g.grad, {n, w[1]}), 0, reshape(g.inputs[1], {n}), w)};
          },
          .save_inputs = 0b10,
          .cost = index_cost});

  // Inputs weight, indices, offsets, per_sample_weights (optional); attribute
  // mode (EmbeddingBagMode). The gradients come from their own kernels: one
  // pass each, no [n, D] intermediate.
  define({.name = "embedding_bag", .family = "index", .inputs = 4,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            check_bag_shapes(in[0], in[1], in[2], in[3], mode_of(a));
            return Metas{{{in[2].shape[0], in[0].shape[1]}, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& weight = a.inputs[0];
            const Bags bags = check_bags(weight, a.inputs[1], a.inputs[2], a.inputs[3], mode_of(a.attrs));
            const int64_t D = weight.size(1);
            const Tensor wc = weight.contiguous();
            Tensor y = Tensor::empty({a.inputs[2].numel(), D}, weight.dtype());
            float_or_double(weight.dtype(), [&](auto zero) {
              using T = decltype(zero);
              bag_forward<T>(bags, wc.data<T>(), D, y.data<T>());
            });
            return Outputs{y};
          })},
          .backward = [](const GradArgs& g) {
            Grads grads(4);
            if (g.needs(0)) {
              grads[0] = op::call1(BRAID_OP("embedding_bag_backward"), {g.grad, g.inputs[1], g.inputs[2], g.inputs[3]},
                                   {{"mode", g.attrs.i("mode")}, {"num_weights", g.input_meta[0].shape[0]}});
            }
            if (g.needs(3)) {
              grads[3] = op::call1(BRAID_OP("embedding_bag_per_sample_weights_backward"),
                                   {g.grad, g.inputs[0], g.inputs[1], g.inputs[2]});
            }
            return grads;
          },
          // The weight is read only for per_sample_weights' gradient; holding
          // a parameter costs no memory.
          .save_inputs = 0b1111,
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double rows = static_cast<double>(in[1].shape[0]), d = static_cast<double>(in[0].shape[1]);
            return Cost{2 * rows * d, rows * d * static_cast<double>(itemsize(in[0].dtype)) + bytes_of(in[1]) +
                                          bytes_of(in[2]) + bytes_of(in[3]) + bytes_of(out[0]),
                        log2_depth(rows / std::max(1.0, static_cast<double>(out[0].shape[0])))};
          }});
  // embedding_bag's weight gradient: inputs grad [B, D], indices, offsets,
  // per_sample_weights (optional); attributes mode, num_weights (V) -> [V, D].
  define({.name = "embedding_bag_backward", .family = "index", .inputs = 4,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const TensorMeta w{{a.i("num_weights"), in[0].shape.size() == 2 ? in[0].shape[1] : 0}, in[0].dtype};
            check_bag_shapes(w, in[1], in[2], in[3], mode_of(a));
            check_bag_grad("embedding_bag_backward", in[0], in[2]);
            return Metas{w};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& g = a.inputs[0];
            check_bag_grad("embedding_bag_backward", meta_of(g), meta_of(a.inputs[2]));
            const int64_t V = a.attrs.i("num_weights"), D = g.size(1);
            Tensor gw = Tensor::zeros({V, D}, g.dtype());
            const Bags bags = check_bags(gw, a.inputs[1], a.inputs[2], a.inputs[3], mode_of(a.attrs));
            const Tensor gc = g.contiguous();
            float_or_double(g.dtype(), [&](auto zero) {
              using T = decltype(zero);
              bag_backward_weight<T>(bags, gc.data<T>(), D, gw.data<T>());
            });
            return Outputs{gw};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double rows = static_cast<double>(in[1].shape[0]), d = static_cast<double>(out[0].shape[1]);
            const double v = std::max(1.0, static_cast<double>(out[0].shape[0]));
            return Cost{2 * rows * d, bytes_of(in[0]) + 2 * bytes_of(out[0]) + bytes_of(in[1]) + bytes_of(in[2]),
                        log2_depth(std::ceil(rows / v))};
          }});
  // per_sample_weights' gradient: inputs grad [B, D], weight, indices, offsets
  // -> [n], dot(grad[bag of k], weight[indices[k]]).
  define({.name = "embedding_bag_per_sample_weights_backward", .family = "index", .inputs = 4,
          .infer = [](std::span<const TensorMeta> in, const Attrs&) {
            check_bag_shapes(in[1], in[2], in[3], TensorMeta{{}, DType::f32, true}, EmbeddingBagMode::sum);
            check_bag_grad("embedding_bag_per_sample_weights_backward", in[0], in[3]);
            return Metas{{in[2].shape, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            const Tensor& g = a.inputs[0];
            const Tensor& weight = a.inputs[1];
            check_bag_grad("embedding_bag_per_sample_weights_backward", meta_of(g), meta_of(a.inputs[3]));
            if (g.dtype() != weight.dtype() || g.size(1) != weight.size(1)) {
              fail<ValueError>("embedding_bag_per_sample_weights_backward: gradient {} {} does not match weight {} {}",
                               name(g.dtype()), to_string(g.shape()), name(weight.dtype()), to_string(weight.shape()));
            }
            const Bags bags = check_bags(weight, a.inputs[2], a.inputs[3], Tensor{}, EmbeddingBagMode::sum);
            const Tensor gc = g.contiguous(), wc = weight.contiguous();
            Tensor gp = Tensor::empty({a.inputs[2].numel()}, g.dtype());
            float_or_double(g.dtype(), [&](auto zero) {
              using T = decltype(zero);
              bag_backward_psw<T>(bags, gc.data<T>(), wc.data<T>(), g.size(1), gp.data<T>());
            });
            return Outputs{gp};
          })},
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            const double rows = static_cast<double>(in[2].shape[0]), d = static_cast<double>(in[1].shape[1]);
            return Cost{2 * rows * d, rows * d * static_cast<double>(itemsize(in[1].dtype)) + bytes_of(in[0]) +
                                          bytes_of(in[2]) + bytes_of(in[3]) + bytes_of(out[0]),
                        log2_depth(d)};
          }});

  // Slices of x along `dim` picked by a 1-D i64 index.
  define({.name = "index_select", .family = "index", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            return Metas{{selected_shape("index_select", in[0].shape, a.i("dim"), in[1]), in[0].dtype}};
          },
          .kernels = {cpu_kernel({}, [](const Args& a) {
            return Outputs{cpu::index_select(a.inputs[0], a.attrs.i("dim"), a.inputs[1], "index_select")};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{index_select_backward(g.grad, g.attrs.i("dim"), g.inputs[1], g.input_meta[0].shape)};
          },
          .save_inputs = 0b10,
          .cost = index_cost});
  // Its adjoint: inputs src, index; attributes dim, shape. Zeros of `shape`
  // with src's slices added at index along dim (repeated indices add up).
  define({.name = "index_select_backward", .family = "index", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const Shape& shape = a.ints("shape");
            if (selected_shape("index_select_backward", shape, a.i("dim"), in[1]) != in[0].shape) {
              fail<ValueError>("index_select_backward: source {} does not fit {} and index {} along dim {}",
                               to_string(in[0].shape), to_string(shape), to_string(in[1].shape), a.i("dim"));
            }
            return Metas{{shape, in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            Tensor out = Tensor::zeros(a.attrs.ints("shape"), a.inputs[0].dtype());
            cpu::index_add_into(out, a.attrs.i("dim"), a.inputs[1], a.inputs[0], "index_select_backward");
            return Outputs{out};
          })},
          .backward = [](const GradArgs& g) { return Grads{index_select(g.grad, g.attrs.i("dim"), g.inputs[1])}; },
          .save_inputs = 0b10,
          .cost = scatter_cost});

  // out[a, j, b] = x[a, index[a, j, b], b] along `dim`.
  define({.name = "gather", .family = "index", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            check_gather("gather", in[0].shape, a.i("dim"), in[1]);
            return Metas{{in[1].shape, in[0].dtype}};
          },
          .kernels = {cpu_kernel({}, [](const Args& a) {
            return Outputs{cpu::gather(a.inputs[0], a.attrs.i("dim"), a.inputs[1], "gather")};
          })},
          .backward = [](const GradArgs& g) {
            return Grads{gather_backward(g.grad, g.attrs.i("dim"), g.inputs[1], g.input_meta[0].shape)};
          },
          .save_inputs = 0b10,
          .cost = index_cost});
  // Its adjoint: inputs src, index (same shape); attributes dim, shape. Zeros
  // of `shape` with src added at index along dim.
  define({.name = "gather_backward", .family = "index", .inputs = 2,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            check_gather("gather_backward", a.ints("shape"), a.i("dim"), in[1]);
            if (in[0].shape != in[1].shape) {
              fail<ValueError>("gather_backward: source {} must have the index's shape {}", to_string(in[0].shape),
                               to_string(in[1].shape));
            }
            return Metas{{a.ints("shape"), in[0].dtype}};
          },
          .kernels = {cpu_kernel(kFloat, [](const Args& a) {
            Tensor out = Tensor::zeros(a.attrs.ints("shape"), a.inputs[0].dtype());
            cpu::scatter_add_into(out, a.attrs.i("dim"), a.inputs[1], a.inputs[0], "gather_backward");
            return Outputs{out};
          })},
          .backward = [](const GradArgs& g) { return Grads{gather(g.grad, g.attrs.i("dim"), g.inputs[1])}; },
          .save_inputs = 0b10,
          .cost = scatter_cost});
}

}  // namespace op

// ---- the eager functions ----

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  return op::call1(BRAID_OP("embedding"), {weight, indices});
}

Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                     const Tensor& per_sample_weights, EmbeddingBagMode mode) {
  return op::call1(BRAID_OP("embedding_bag"), {weight, indices, offsets, per_sample_weights},
                   {{"mode", static_cast<int64_t>(mode)}});
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return op::call1(BRAID_OP("index_select"), {x, index}, {{"dim", dim}});
}

Tensor index_select_backward(const Tensor& src, int64_t dim, const Tensor& index, const Shape& shape) {
  return op::call1(BRAID_OP("index_select_backward"), {src, index}, {{"dim", dim}, {"shape", shape}});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  return op::call1(BRAID_OP("gather"), {x, index}, {{"dim", dim}});
}

Tensor gather_backward(const Tensor& src, int64_t dim, const Tensor& index, const Shape& shape) {
  return op::call1(BRAID_OP("gather_backward"), {src, index}, {{"dim", dim}, {"shape", shape}});
}

}  // namespace braid
