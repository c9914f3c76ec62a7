// Checks of index values that run on the device and raise at the next point
// where the host waits for it, instead of copying the indices to the host and
// waiting on every call (a sync each, which drains the GPU's queue).
//
// A check is a kernel (index_kernels.h: range_check) given an id; the first
// value out of range since the last sync claims the GPU's CheckRecord
// (memory.h) with the id, position and value. The host keeps each check's
// message, by id, in a ring; every wait for the device (a copy to the host,
// synchronize) reads the record and throws IndexError with the message the
// CPU kernel would have given. Until then the kernels that read through the
// indices skip values out of range, so nothing is read outside a tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "braid/tensor/tensor.h"

namespace braid::cuda {

// The message of a failed check from its first bad value and its position.
using CheckMessage = std::function<std::string(int64_t position, int64_t value)>;

// Queues a check that every value of `index` (contiguous i64 on a GPU) lies
// in [0, bound); a failure raises `message` at the next sync.
void check_range_on_device(const Tensor& index, int64_t bound, CheckMessage message);

// Reads GPU `device`'s record once the host has waited for it; throws
// IndexError for a failed check (clearing the record first).
void raise_failed_checks(int device);

}  // namespace braid::cuda
