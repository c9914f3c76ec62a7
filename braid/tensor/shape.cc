#include "braid/tensor/shape.h"

#include <algorithm>

#include "braid/base/error.h"

namespace braid {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

std::string to_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      fail<ValueError>("{}: shapes {} and {} cannot be broadcast together", op, to_string(a), to_string(b));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t d = dim < 0 ? dim + ndim : dim;
  if (d < 0 || d >= std::max<int64_t>(ndim, 1)) {
    fail<IndexError>("{}: dimension {} out of range for a tensor with {} dimensions", op, dim, ndim);
  }
  return d;
}

std::vector<bool> reduced_dims(const Shape& shape, const std::vector<int64_t>& dims, const char* op) {
  const auto nd = static_cast<int64_t>(shape.size());
  std::vector<bool> reduce(shape.size(), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, op);
    if (nd == 0) continue;
    if (reduce[w]) fail<ValueError>("{}: dimension {} repeated in dims {} (input {})", op, d, Shape(dims), to_string(shape));
    reduce[w] = true;
  }
  return reduce;
}

Shape reduced_shape(const Shape& shape, const std::vector<bool>& reduce, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduce[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

std::vector<bool> sum_to_dims(const Shape& from, const Shape& to) {
  const int64_t lead = static_cast<int64_t>(from.size()) - static_cast<int64_t>(to.size());
  if (lead < 0) fail<ValueError>("sum_to: cannot reduce shape {} to the larger shape {}", to_string(from), to_string(to));
  std::vector<bool> reduce(from.size(), false);
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d) {
    if (d < lead || (to[d - lead] == 1 && from[d] != 1)) {
      reduce[d] = true;
    } else if (to[d - lead] != from[d]) {
      fail<ValueError>("sum_to: shape {} is not a broadcast of {}", to_string(from), to_string(to));
    }
  }
  return reduce;
}

}  // namespace braid
