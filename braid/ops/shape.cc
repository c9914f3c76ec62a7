#include "braid/ops/shape.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "braid/ops/define.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/tensor_ops.h"

namespace braid {

// ---- the ops ----

namespace op {
namespace {

std::string shapes_of(std::span<const TensorMeta> xs) {
  std::string s;
  for (const TensorMeta& x : xs) s += (s.empty() ? "" : ", ") + to_string(x.shape) + " " + std::string(name(x.dtype));
  return s;
}

// `shape` with a single -1 resolved against `numel` elements of `in`.
Shape resolve_shape(const Shape& in, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) fail<ValueError>("reshape: more than one -1 in {} (input {})", to_string(shape), to_string(in));
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      fail<ValueError>("reshape: negative size in {} (input {})", to_string(shape), to_string(in));
    } else {
      known *= shape[i];
    }
  }
  const int64_t n = numel(in);
  if (infer >= 0) {
    if (known == 0 || n % known != 0) fail<ValueError>("reshape: cannot reshape {} into {}", to_string(in), to_string(shape));
    shape[infer] = n / known;
  }
  if (numel(shape) != n) {
    fail<ValueError>("reshape: cannot reshape {} ({} elements) into {}", to_string(in), n, to_string(shape));
  }
  return shape;
}

// Strides that let a tensor of shape `os` and strides `ost` be viewed as
// `shape` without copying, if any (PyTorch's computeStride): each run of dims
// that is contiguous in memory must be split/merged into whole dims of the
// new shape.
std::optional<Shape> view_strides(const Shape& os, const Shape& ost, const Shape& shape) {
  if (os.empty() || numel(os) == 0) return contiguous_strides(shape);
  Shape st(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base = ost.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[d];
    if (d == 0 || (os[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        st[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base = ost[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

std::optional<Shape> view_strides_of(const Tensor& x, const Shape& shape) {
  if (x.is_contiguous()) return contiguous_strides(shape);
  return view_strides(x.shape(), x.strides(), shape);
}

// permute: output dim i is input dim dims[i]; returns the inverse permutation.
std::vector<int64_t> check_permutation(const Shape& in, const std::vector<int64_t>& dims) {
  const int64_t nd = static_cast<int64_t>(in.size());
  if (static_cast<int64_t>(dims.size()) != nd) {
    fail<ValueError>("permute: {} dims given for input {}", dims.size(), to_string(in));
  }
  std::vector<int64_t> inverse(nd, -1);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = wrap_dim(dims[i], nd, "permute");
    if (inverse[d] >= 0) fail<ValueError>("permute: dim {} repeated in {} (input {})", dims[i], to_string(dims), to_string(in));
    inverse[d] = i;
  }
  return inverse;
}

// A slice along one dim, with start/end clamped as Python slicing does.
struct SliceSpec {
  int64_t dim, start, end, step;
  int64_t size() const { return end > start ? (end - start + step - 1) / step : 0; }
};

SliceSpec slice_spec(const Shape& in, const Attrs& a) {
  const int64_t nd = static_cast<int64_t>(in.size());
  const int64_t d = wrap_dim(a.i("dim"), nd, "slice");
  if (nd == 0) fail<IndexError>("slice: cannot slice a 0-d tensor");
  const int64_t step = a.i("step");
  if (step < 1) fail<ValueError>("slice: step must be >= 1, got {} (input {})", step, to_string(in));
  const int64_t n = in[d];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  return {d, clamp(a.i("start")), clamp(a.i("end")), step};
}

Tensor slice_view(const Tensor& x, const SliceSpec& s) {
  Shape shape = x.shape(), strides = x.strides();
  shape[s.dim] = s.size();
  strides[s.dim] *= s.step;
  return x.as_strided(shape, strides, x.offset() + (shape[s.dim] > 0 ? s.start * x.strides()[s.dim] : 0));
}

Shape sliced_shape(const Shape& in, const SliceSpec& s) {
  Shape out = in;
  out[s.dim] = s.size();
  return out;
}

// expand: the output shape (-1 keeps a size) and strides of the view.
std::pair<Shape, Shape> expanded(const Shape& in, const Shape& in_strides, const Shape& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size()), lead = nd - static_cast<int64_t>(in.size());
  if (lead < 0) fail<ValueError>("expand: cannot expand {} to fewer dims {}", to_string(in), to_string(shape));
  Shape out(nd), strides(nd, 0);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t have = i < lead ? 1 : in[i - lead];
    out[i] = shape[i] == -1 ? have : shape[i];
    if (i >= lead && have == out[i]) {
      strides[i] = in_strides.empty() ? 0 : in_strides[i - lead];
    } else if (have != 1 || out[i] < 0) {
      fail<ValueError>("expand: cannot expand {} to {}", to_string(in), to_string(shape));
    }
  }
  return {out, strides};
}

// squeeze: the dims to drop, wrapped; each must have size 1.
std::vector<bool> squeezed_dims(const Shape& in, const std::vector<int64_t>& dims) {
  std::vector<bool> drop(in.size(), false);
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, static_cast<int64_t>(in.size()), "squeeze");
    if (in.empty()) continue;
    if (in[d] != 1) fail<ValueError>("squeeze: dim {} of {} has size {}, not 1", dim, to_string(in), in[d]);
    drop[d] = true;
  }
  return drop;
}

// concat: the output shape; every input agrees in dtype and all dims but `dim`.
Shape concat_shape(std::span<const TensorMeta> xs, int64_t dim) {
  if (xs.empty()) fail<ValueError>("concat: no tensors given");
  const TensorMeta& first = xs[0];
  if (first.shape.empty()) fail<ValueError>("concat: cannot concatenate 0-d tensors ({})", shapes_of(xs));
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(first.shape.size()), "concat");
  Shape shape = first.shape;
  shape[d] = 0;
  for (const TensorMeta& x : xs) {
    bool ok = !x.absent && x.dtype == first.dtype && x.shape.size() == first.shape.size();
    for (size_t i = 0; ok && i < x.shape.size(); ++i) ok = static_cast<int64_t>(i) == d || x.shape[i] == first.shape[i];
    if (!ok) fail<ValueError>("concat: tensors must agree in dtype and in every dim but {}: {}", dim, shapes_of(xs));
    shape[d] += x.shape[d];
  }
  return shape;
}

std::vector<TensorMeta> metas_of(std::span<const Tensor> xs) {
  std::vector<TensorMeta> m;
  for (const Tensor& x : xs) m.push_back(meta_of(x));
  return m;
}

// A view moves no data and computes nothing.
Cost view_cost(std::span<const TensorMeta>, std::span<const TensorMeta>, const Attrs&) { return Cost{0, 0, 0}; }

// A copy into fresh memory: every output byte written, as many read.
Cost copy_cost(std::span<const TensorMeta>, std::span<const TensorMeta> out, const Attrs&) {
  return Cost{0, 2 * bytes_of(out[0]), 1};
}

// Views: one function serves the CPU and the meta device.
OpDef view_op(const char* name, InferFn infer, Kernel fn, BackwardFn backward) {
  return {.name = name, .family = "shape", .inputs = 1, .effect = Effect::view, .infer = std::move(infer),
          .kernels = {cpu_kernel({}, fn), meta_kernel(fn)}, .backward = std::move(backward), .cost = view_cost};
}

}  // namespace

void define_shape_ops(const Definer& define) {
  // A view with new sizes (one -1 inferred). Only when the strides allow it:
  // the eager reshape() copies first when they do not.
  define(view_op(
      "reshape",
      [](std::span<const TensorMeta> in, const Attrs& a) {
        return Metas{{resolve_shape(in[0].shape, a.ints("shape")), in[0].dtype}};
      },
      [](const Args& a) {
        const Tensor& x = a.inputs[0];
        const Shape shape = resolve_shape(x.shape(), a.attrs.ints("shape"));
        const std::optional<Shape> strides = view_strides_of(x, shape);
        if (!strides) {
          fail<ValueError>("reshape: {} with strides {} cannot be viewed as {} without a copy", to_string(x.shape()),
                           to_string(x.strides()), to_string(shape));
        }
        return Outputs{x.as_strided(shape, *strides, x.offset())};
      },
      [](const GradArgs& g) { return Grads{reshape(g.grad, g.input_meta[0].shape)}; }));

  define(view_op(
      "permute",
      [](std::span<const TensorMeta> in, const Attrs& a) {
        const std::vector<int64_t>& dims = a.ints("dims");
        check_permutation(in[0].shape, dims);
        Shape shape;
        for (int64_t d : dims) shape.push_back(in[0].shape[wrap_dim(d, static_cast<int64_t>(dims.size()), "permute")]);
        return Metas{{shape, in[0].dtype}};
      },
      [](const Args& a) {
        const Tensor& x = a.inputs[0];
        const std::vector<int64_t>& dims = a.attrs.ints("dims");
        check_permutation(x.shape(), dims);
        Shape shape, strides;
        for (int64_t dim : dims) {
          const int64_t d = wrap_dim(dim, x.ndim(), "permute");
          shape.push_back(x.shape()[d]);
          strides.push_back(x.strides()[d]);
        }
        return Outputs{x.as_strided(shape, strides, x.offset())};
      },
      [](const GradArgs& g) {
        return Grads{permute(g.grad, check_permutation(g.input_meta[0].shape, g.attrs.ints("dims")))};
      }));

  // Attributes dim, start, end, step as slice() takes them.
  define(view_op(
      "slice",
      [](std::span<const TensorMeta> in, const Attrs& a) {
        return Metas{{sliced_shape(in[0].shape, slice_spec(in[0].shape, a)), in[0].dtype}};
      },
      [](const Args& a) { return Outputs{slice_view(a.inputs[0], slice_spec(a.inputs[0].shape(), a.attrs))}; },
      [](const GradArgs& g) {
        Attrs a = g.attrs;
        a.set("shape", g.input_meta[0].shape);
        return Grads{op::call1(BRAID_OP("slice_backward"), {g.grad}, a)};
      }));
  // slice's adjoint: zeros of `shape` with the slice (dim, start, end, step)
  // set to the input.
  define({.name = "slice_backward", .family = "shape", .inputs = 1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            const Shape& shape = a.ints("shape");
            if (sliced_shape(shape, slice_spec(shape, a)) != in[0].shape) {
              fail<ValueError>("slice_backward: gradient {} does not fit the slice of {} ({})", to_string(in[0].shape),
                               to_string(shape), a.to_string());
            }
            return Metas{{shape, in[0].dtype}};
          },
          .kernels = every_device([](const Args& a) {
            const Shape& shape = a.attrs.ints("shape");
            Tensor gx = Tensor::zeros(shape, a.inputs[0].dtype(), a.inputs[0].device());
            slice_view(gx, slice_spec(shape, a.attrs)).copy_from(a.inputs[0]);
            return Outputs{gx};
          }),
          .backward = [](const GradArgs& g) {
            return Grads{slice(g.grad, g.attrs.i("dim"), g.attrs.i("start"), g.attrs.i("end"), g.attrs.i("step"))};
          },
          .cost = [](std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&) {
            return Cost{0, bytes_of(out[0]) + 2 * bytes_of(in[0]), 1};
          }});

  define(view_op(
      "expand",
      [](std::span<const TensorMeta> in, const Attrs& a) {
        return Metas{{expanded(in[0].shape, {}, a.ints("shape")).first, in[0].dtype}};
      },
      [](const Args& a) {
        const Tensor& x = a.inputs[0];
        const auto [shape, strides] = expanded(x.shape(), x.strides(), a.attrs.ints("shape"));
        return Outputs{x.as_strided(shape, strides, x.offset())};
      },
      [](const GradArgs& g) { return Grads{sum_to(g.grad, g.input_meta[0].shape)}; }));

  // Drops the listed dims, each of size 1.
  define(view_op(
      "squeeze",
      [](std::span<const TensorMeta> in, const Attrs& a) {
        const std::vector<bool> drop = squeezed_dims(in[0].shape, a.ints("dims"));
        Shape shape;
        for (size_t d = 0; d < drop.size(); ++d) if (!drop[d]) shape.push_back(in[0].shape[d]);
        return Metas{{shape, in[0].dtype}};
      },
      [](const Args& a) {
        const Tensor& x = a.inputs[0];
        const std::vector<bool> drop = squeezed_dims(x.shape(), a.attrs.ints("dims"));
        Shape shape, strides;
        for (size_t d = 0; d < drop.size(); ++d) {
          if (drop[d]) continue;
          shape.push_back(x.shape()[d]);
          strides.push_back(x.strides()[d]);
        }
        return Outputs{x.as_strided(shape, strides, x.offset())};
      },
      [](const GradArgs& g) { return Grads{reshape(g.grad, g.input_meta[0].shape)}; }));

  // Inserts a size-1 dim at `dim` (in [-ndim-1, ndim]).
  define(view_op(
      "unsqueeze",
      [](std::span<const TensorMeta> in, const Attrs& a) {
        Shape shape = in[0].shape;
        shape.insert(shape.begin() + wrap_dim(a.i("dim"), static_cast<int64_t>(shape.size()) + 1, "unsqueeze"), 1);
        return Metas{{shape, in[0].dtype}};
      },
      [](const Args& a) {
        const Tensor& x = a.inputs[0];
        const int64_t d = wrap_dim(a.attrs.i("dim"), x.ndim() + 1, "unsqueeze");
        Shape shape = x.shape(), strides = x.strides();
        // Any stride works for a size-1 dim; this one keeps contiguous inputs contiguous.
        const int64_t stride = d < x.ndim() ? x.strides()[d] * x.shape()[d] : 1;
        shape.insert(shape.begin() + d, 1);
        strides.insert(strides.begin() + d, stride);
        return Outputs{x.as_strided(shape, strides, x.offset())};
      },
      [](const GradArgs& g) { return Grads{reshape(g.grad, g.input_meta[0].shape)}; }));

  // Any number of inputs of one dtype, joined along `dim` into fresh memory.
  define({.name = "concat", .family = "shape", .inputs = -1,
          .infer = [](std::span<const TensorMeta> in, const Attrs& a) {
            return Metas{{concat_shape(in, a.i("dim")), in.empty() ? DType::f32 : in[0].dtype}};
          },
          .kernels = every_device([](const Args& a) {
            const Shape shape = concat_shape(metas_of(a.inputs), a.attrs.i("dim"));
            const int64_t d = wrap_dim(a.attrs.i("dim"), static_cast<int64_t>(shape.size()), "concat");
            Tensor y = Tensor::empty(shape, a.inputs[0].dtype(), a.inputs[0].device());
            int64_t at = 0;
            for (const Tensor& x : a.inputs) {
              slice_view(y, {d, at, at + x.shape()[d], 1}).copy_from(x);
              at += x.shape()[d];
            }
            return Outputs{y};
          }),
          .backward = [](const GradArgs& g) {
            const int64_t d = wrap_dim(g.attrs.i("dim"), g.grad.ndim(), "concat");
            Grads gs(g.input_meta.size());
            int64_t at = 0;
            for (size_t i = 0; i < gs.size(); ++i) {
              const int64_t s = g.input_meta[i].shape[d];
              if (g.needs(i)) gs[i] = slice(g.grad, d, at, at + s);
              at += s;
            }
            return gs;
          },
          .cost = copy_cost});
}

}  // namespace op

// ---- the eager functions ----

Tensor reshape(const Tensor& x, Shape shape) {
  shape = op::resolve_shape(x.shape(), std::move(shape));
  // Not viewable with these strides: one copy first, as PyTorch's reshape.
  const Tensor src = op::view_strides_of(x, shape) ? x : clone(x);
  return op::call1(BRAID_OP("reshape"), {src}, {{"shape", std::move(shape)}});
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.ndim() == 0) return reshape(x, {1});
  const int64_t s = wrap_dim(start_dim, x.ndim(), "flatten"), e = wrap_dim(end_dim, x.ndim(), "flatten");
  if (s > e) fail<ValueError>("flatten: start_dim {} after end_dim {} (input {})", start_dim, end_dim, to_string(x.shape()));
  Shape shape(x.shape().begin(), x.shape().begin() + s);
  int64_t merged = 1;
  for (int64_t d = s; d <= e; ++d) merged *= x.shape()[d];
  shape.push_back(merged);
  shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, shape);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  return op::call1(BRAID_OP("permute"), {x}, {{"dims", dims}});
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  std::vector<int64_t> dims(x.ndim());
  std::iota(dims.begin(), dims.end(), 0);
  if (x.ndim() > 0) std::swap(dims[wrap_dim(dim0, x.ndim(), "transpose")], dims[wrap_dim(dim1, x.ndim(), "transpose")]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return op::call1(BRAID_OP("slice"), {x}, {{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}

Tensor expand(const Tensor& x, const Shape& shape) { return op::call1(BRAID_OP("expand"), {x}, {{"shape", shape}}); }

Tensor squeeze(const Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.ndim(); ++d) if (x.shape()[d] == 1) dims.push_back(d);
  return op::call1(BRAID_OP("squeeze"), {x}, {{"dims", dims}});
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  std::vector<int64_t> dims;
  if (x.ndim() > 0) {
    const int64_t d = wrap_dim(dim, x.ndim(), "squeeze");
    if (x.shape()[d] != 1) return x;
    dims.push_back(d);
  }
  return op::call1(BRAID_OP("squeeze"), {x}, {{"dims", dims}});
}

Tensor unsqueeze(const Tensor& x, int64_t dim) { return op::call1(BRAID_OP("unsqueeze"), {x}, {{"dim", dim}}); }

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  if (xs.empty()) fail<ValueError>("concat: no tensors given");
  return op::call1(BRAID_OP("concat"), std::span<const Tensor>(xs), {{"dim", dim}});
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.ndim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail<ValueError>("split: negative size in {} (input {})", to_string(sizes), to_string(x.shape()));
    total += s;
  }
  if (x.ndim() == 0 || total != x.shape()[d]) {
    fail<ValueError>("split: sizes {} do not add up to dim {} of {}", to_string(sizes), dim, to_string(x.shape()));
  }
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(slice(x, d, at, at + s));
    at += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.ndim(), "split");
  if (split_size < 1) fail<ValueError>("split: split_size must be >= 1, got {} (input {})", split_size, to_string(x.shape()));
  if (x.ndim() == 0) fail<ValueError>("split: cannot split a 0-d tensor");
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < x.shape()[d]; at += split_size) sizes.push_back(std::min(split_size, x.shape()[d] - at));
  return split(x, sizes, d);
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  if (xs.empty()) fail<ValueError>("stack: no tensors given");
  const int64_t d = wrap_dim(dim, xs[0].ndim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& x : xs) {
    if (x.shape() != xs[0].shape()) {
      std::vector<op::TensorMeta> m;
      for (const Tensor& t : xs) m.push_back(op::meta_of(t));
      fail<ValueError>("stack: tensors must have equal shapes: {}", op::shapes_of(m));
    }
    parts.push_back(unsqueeze(x, d));
  }
  return concat(parts, d);
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

}  // namespace braid
