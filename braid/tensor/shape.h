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

}  // namespace braid
