#include "braid/ops/shape.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "braid/autograd/node.h"
#include "braid/tensor/cpu/reduce.h"

namespace braid {

namespace {

using autograd::record;
using Grads = std::vector<Tensor>;

std::string shapes_of(const std::vector<Tensor>& xs) {
  std::string s;
  for (const Tensor& x : xs) s += (s.empty() ? "" : ", ") + to_string(x.shape()) + " " + std::string(name(x.dtype()));
  return s;
}

// Resolves a single -1 and checks the element count.
Shape infer_shape(const Tensor& x, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) fail<ValueError>("reshape: more than one -1 in {} (input {})", to_string(shape), to_string(x.shape()));
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      fail<ValueError>("reshape: negative size in {} (input {})", to_string(shape), to_string(x.shape()));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0) {
      fail<ValueError>("reshape: cannot reshape {} into {}", to_string(x.shape()), to_string(shape));
    }
    shape[infer] = x.numel() / known;
  }
  if (numel(shape) != x.numel()) {
    fail<ValueError>("reshape: cannot reshape {} ({} elements) into {}", to_string(x.shape()), x.numel(),
                     to_string(shape));
  }
  return shape;
}

// Strides that let `x` be viewed as `shape` without copying, if any (PyTorch's
// computeStride): each run of dims of x that is contiguous in memory must be
// split/merged into whole dims of the new shape.
std::optional<Shape> view_strides(const Tensor& x, const Shape& shape) {
  if (x.ndim() == 0 || x.numel() == 0) return contiguous_strides(shape);
  const Shape& os = x.shape();
  const Shape& ost = x.strides();
  Shape st(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base = ost.back(), tensor_numel = 1, view_numel = 1;
  for (int64_t d = x.ndim() - 1; d >= 0; --d) {
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

// The slice of x along dim as a view (no autograd); start/end already valid.
Tensor slice_view(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Shape shape = x.shape(), strides = x.strides();
  shape[dim] = end > start ? (end - start + step - 1) / step : 0;
  strides[dim] *= step;
  return x.as_strided(shape, strides, x.offset() + (shape[dim] > 0 ? start * x.strides()[dim] : 0));
}

}  // namespace

Tensor reshape(const Tensor& x, Shape shape) {
  shape = infer_shape(x, std::move(shape));
  Tensor y;
  if (x.is_contiguous()) {
    y = x.as_strided(shape, contiguous_strides(shape), x.offset());
  } else if (auto strides = view_strides(x, shape)) {
    y = x.as_strided(shape, *strides, x.offset());
  } else {
    const Tensor c = x.contiguous();
    y = c.as_strided(shape, contiguous_strides(shape), c.offset());
  }
  record("reshape", {x}, y, [in_shape = x.shape()](const Tensor& g) { return Grads{reshape(g, in_shape)}; });
  return y;
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.ndim() == 0) return reshape(x, {1});
  const int64_t s = wrap_dim(start_dim, x.ndim(), "flatten"), e = wrap_dim(end_dim, x.ndim(), "flatten");
  if (s > e) fail<ValueError>("flatten: start_dim {} after end_dim {} (input {})", start_dim, end_dim, to_string(x.shape()));
  Shape shape(x.shape().begin(), x.shape().begin() + s);
  shape.push_back(-1);
  shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
  if (x.numel() == 0) {  // -1 cannot be inferred from zero elements
    int64_t merged = 1;
    for (int64_t d = s; d <= e; ++d) merged *= x.shape()[d];
    shape[s] = merged;
  }
  return reshape(x, shape);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  const int64_t nd = x.ndim();
  if (static_cast<int64_t>(dims.size()) != nd) {
    fail<ValueError>("permute: {} dims given for input {}", dims.size(), to_string(x.shape()));
  }
  Shape shape(nd), strides(nd);
  std::vector<int64_t> inverse(nd, -1);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = wrap_dim(dims[i], nd, "permute");
    if (inverse[d] >= 0) fail<ValueError>("permute: dim {} repeated in {} (input {})", dims[i], Shape(dims), to_string(x.shape()));
    inverse[d] = i;
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
  }
  Tensor y = x.as_strided(shape, strides, x.offset());
  record("permute", {x}, y, [inverse](const Tensor& g) { return Grads{permute(g, inverse)}; });
  return y;
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  std::vector<int64_t> dims(x.ndim());
  std::iota(dims.begin(), dims.end(), 0);
  if (x.ndim() == 0) return permute(x, dims);
  std::swap(dims[wrap_dim(dim0, x.ndim(), "transpose")], dims[wrap_dim(dim1, x.ndim(), "transpose")]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  const int64_t d = wrap_dim(dim, x.ndim(), "slice");
  if (x.ndim() == 0) fail<IndexError>("slice: cannot slice a 0-d tensor");
  if (step < 1) fail<ValueError>("slice: step must be >= 1, got {} (input {})", step, to_string(x.shape()));
  const int64_t n = x.shape()[d];
  auto clamp = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clamp(start);
  end = clamp(end);
  Tensor y = slice_view(x, d, start, end, step);
  record("slice", {x}, y, [in_shape = x.shape(), dtype = x.dtype(), d, start, end, step](const Tensor& g) {
    Tensor gx = Tensor::zeros(in_shape, dtype);
    slice_view(gx, d, start, end, step).copy_from(g);
    return Grads{gx};
  });
  return y;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size()), lead = nd - x.ndim();
  if (lead < 0) fail<ValueError>("expand: cannot expand {} to fewer dims {}", to_string(x.shape()), to_string(shape));
  Shape out(nd), strides(nd, 0);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t have = i < lead ? 1 : x.shape()[i - lead];
    out[i] = shape[i] == -1 ? have : shape[i];
    if (i >= lead && have == out[i]) {
      strides[i] = x.strides()[i - lead];
    } else if (have != 1 || out[i] < 0) {
      fail<ValueError>("expand: cannot expand {} to {}", to_string(x.shape()), to_string(shape));
    }
  }
  Tensor y = x.as_strided(out, strides, x.offset());
  record("expand", {x}, y, [in_shape = x.shape()](const Tensor& g) { return Grads{cpu::sum_to(g, in_shape)}; });
  return y;
}

Tensor squeeze(const Tensor& x) {
  Shape shape;
  for (int64_t s : x.shape()) if (s != 1) shape.push_back(s);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (x.ndim() == 0) return reshape(x, {});
  const int64_t d = wrap_dim(dim, x.ndim(), "squeeze");
  if (x.shape()[d] != 1) return x;
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return reshape(x, shape);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.ndim() + 1, "unsqueeze");
  Shape shape = x.shape(), strides = x.strides();
  // Any stride works for a size-1 dim; this one keeps contiguous inputs contiguous.
  const int64_t stride = d < x.ndim() ? x.strides()[d] * x.shape()[d] : 1;
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, stride);
  Tensor y = x.as_strided(shape, strides, x.offset());
  record("unsqueeze", {x}, y, [in_shape = x.shape()](const Tensor& g) { return Grads{reshape(g, in_shape)}; });
  return y;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  if (xs.empty()) fail<ValueError>("concat: no tensors given");
  const Tensor& first = xs[0];
  if (first.ndim() == 0) fail<ValueError>("concat: cannot concatenate 0-d tensors ({})", shapes_of(xs));
  const int64_t d = wrap_dim(dim, first.ndim(), "concat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& x : xs) {
    bool ok = x.dtype() == first.dtype() && x.ndim() == first.ndim();
    for (int64_t i = 0; ok && i < x.ndim(); ++i) ok = i == d || x.shape()[i] == first.shape()[i];
    if (!ok) fail<ValueError>("concat: tensors must agree in dtype and in every dim but {}: {}", dim, shapes_of(xs));
    shape[d] += x.shape()[d];
  }
  Tensor y = Tensor::empty(shape, first.dtype());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& x : xs) {
    slice_view(y, d, at, at + x.shape()[d], 1).copy_from(x);
    at += x.shape()[d];
    sizes.push_back(x.shape()[d]);
  }
  record("concat", xs, y, [d, sizes](const Tensor& g) {
    Grads gs;
    int64_t at = 0;
    for (int64_t s : sizes) {
      gs.push_back(slice_view(g, d, at, at + s, 1));
      at += s;
    }
    return gs;
  });
  return y;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const int64_t d = wrap_dim(dim, x.ndim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) fail<ValueError>("split: negative size in {} (input {})", Shape(sizes), to_string(x.shape()));
    total += s;
  }
  if (x.ndim() == 0 || total != x.shape()[d]) {
    fail<ValueError>("split: sizes {} do not add up to dim {} of {}", Shape(sizes), dim, to_string(x.shape()));
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
    if (x.shape() != xs[0].shape()) fail<ValueError>("stack: tensors must have equal shapes: {}", shapes_of(xs));
    parts.push_back(unsqueeze(x, d));
  }
  return concat(parts, d);
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor y = x.clone();
  record("contiguous", {x}, y, [](const Tensor& g) { return Grads{g}; });
  return y;
}

}  // namespace braid
