// Shapes and strides (in elements, not bytes).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace braid {

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& shape);
// Row-major strides for `shape`.
Shape contiguous_strides(const Shape& shape);
// "[2, 3, 4]"
std::string to_string(const Shape& shape);
// NumPy broadcasting of two shapes; throws ValueError naming `op` and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Wraps a possibly negative dimension index into [0, ndim); throws IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

// Reductions' shapes, shared by every device's kernels:
// which dims of `shape` the (possibly negative) `dims` reduce; a repeated dim
// is a ValueError naming `op`. A 0-d shape reduces over "dim 0" to itself.
std::vector<bool> reduced_dims(const Shape& shape, const std::vector<int64_t>& dims, const char* op);
// `shape` without the reduced dims (or with 1s there under keepdim).
Shape reduced_shape(const Shape& shape, const std::vector<bool>& reduce, bool keepdim);
// The dims that summing `from` down to `to` reduces (sum_to, the adjoint of
// broadcasting `to` to `from`); ValueError when `to` does not broadcast to `from`.
std::vector<bool> sum_to_dims(const Shape& from, const Shape& to);

}  // namespace braid
