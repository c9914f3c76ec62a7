// What the device tests share: the GPU they run on and the skip where there
// is none (braid_cuda_test on a machine without a GPU; the emulated binary
// always has its one emulated device).
#pragma once

#include <gtest/gtest.h>

#include "braid/tensor/backend.h"

namespace braid::testing {

inline const Device kGpu = Device::cuda(0);

}  // namespace braid::testing

#define BRAID_REQUIRE_GPU()                                                                            \
  do {                                                                                                 \
    if (!::braid::available(::braid::testing::kGpu))                                                   \
      GTEST_SKIP() << "no CUDA device visible to this process: GPU tests skipped";                     \
  } while (0)
