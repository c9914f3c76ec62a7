// How the activation ops read their attributes, for the kernels of every
// device (the CPU's in activation.cc, braid/cuda's), so both accept and refuse
// the same values.
#pragma once

#include "braid/ops/registry.h"

namespace braid::op {

// gelu's attribute "approximate": "none" (erf) or "tanh", as F.gelu names
// them; ValueError otherwise.
bool gelu_is_tanh(const Attrs& a);
// clamp's bounds: attributes "min" and "max", -inf and +inf when absent.
double clamp_lower(const Attrs& a);
double clamp_upper(const Attrs& a);

}  // namespace braid::op
