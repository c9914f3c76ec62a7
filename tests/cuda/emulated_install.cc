// The emulated backend is installed on request (braid/cuda/emulated.h): this
// binary's device tests expect a cuda device from the start, as the real
// backend's registrar provides one.
#include "braid/cuda/emulated.h"

namespace {
const bool installed = (braid::cuda::emulated::install(), true);
}  // namespace
