// A tensor's memory as a communicator buffer, for the layers that hold
// tensors (comm itself works on untyped buffers and does not link the tensor
// library).
#pragma once

#include "braid/base/error.h"
#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::comm {

// All of a contiguous tensor's elements, on its device (a device buffer's
// collectives go to the device's library: NCCL for CUDA).
inline BufferRef buffer_of(const Tensor& t) {
  if (!t.is_contiguous()) fail<ValueError>("buffer_of: tensor of shape {} is not contiguous", to_string(t.shape()));
  return BufferRef(t.raw_data(), static_cast<size_t>(t.numel()), t.dtype(), t.device());
}

}  // namespace braid::comm
