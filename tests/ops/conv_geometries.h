// The convolution geometries both the op table (cases_conv.cc) and the
// implementation checks (conv_test.cc) run: plain, strided, padded, dilated,
// grouped and depthwise, 1x1 and 5x5 kernels, and 3x3 stride-1 ones with odd
// and even sides (Winograd's).
#pragma once

#include <vector>

#include "braid/ops/conv.h"

namespace braid::testing {

struct ConvGeometry {
  Shape x, w;
  Conv2dOptions opt;
  bool bias;
};

inline const std::vector<ConvGeometry>& conv_geometries() {
  static const std::vector<ConvGeometry> g = {
      {{2, 1, 9, 9}, {4, 1, 3, 3}, {}, true},
      {{3, 4, 8, 7}, {6, 4, 3, 2}, {.stride = {2, 1}, .padding = {1, 2}}, true},
      {{2, 4, 9, 9}, {4, 2, 3, 3}, {.padding = {1, 1}, .dilation = {2, 2}, .groups = 2}, false},
      {{2, 6, 6, 5}, {6, 1, 3, 3}, {.stride = {2, 2}, .padding = {1, 0}, .groups = 6}, true},
      {{3, 5, 4, 4}, {7, 5, 1, 1}, {}, true},
      {{1, 3, 7, 6}, {2, 3, 1, 1}, {.stride = {2, 3}}, false},
      {{2, 2, 5, 5}, {3, 2, 5, 5}, {.padding = {2, 2}}, true},
      {{4, 8, 6, 6}, {8, 2, 2, 3}, {.stride = {1, 2}, .padding = {0, 1}, .dilation = {1, 2}, .groups = 4}, true},
      // 3x3 stride 1 (Winograd's): odd and even sides, each padding 0-2.
      {{2, 5, 7, 6}, {4, 5, 3, 3}, {.padding = {1, 1}}, true},
      {{3, 3, 5, 8}, {6, 3, 3, 3}, {.padding = {2, 0}}, false},
      {{1, 2, 3, 3}, {3, 2, 3, 3}, {.padding = {1, 2}}, true},
  };
  return g;
}

}  // namespace braid::testing
