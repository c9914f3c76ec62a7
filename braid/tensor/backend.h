// A device other than the host, as the tensor layer uses it: memory, copies
// and fills. The CUDA backend (braid/cuda) registers itself here when braid is
// built with it; tensors on a device without a backend fail with an error that
// says why. Ops reach the device through their kernels (braid/ops/registry.h),
// not through this interface.
#pragma once

#include <cstddef>

#include "braid/tensor/device.h"
#include "braid/tensor/dtype.h"
#include "braid/tensor/shape.h"

namespace braid {

// Elements of one dtype at `data` with these shape and strides (in elements).
struct StridedRef {
  void* data = nullptr;
  Shape shape;
  Shape strides;
  DType dtype = DType::f32;
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Devices of this type the process can use (0: none, e.g. no GPU here).
  virtual int device_count() = 0;
  // A block of at least nbytes on device `index`, ordered on its current stream.
  virtual void* allocate(size_t nbytes, int index) = 0;
  virtual void deallocate(void* p, int index) = 0;
  // nbytes between any two of: host memory, this backend's devices. A copy to
  // the host has finished when this returns; others are queued on the
  // destination device's current stream.
  virtual void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) = 0;
  // dst[i] = convert(src[i]) over any strides; both on device `index`.
  virtual void copy_strided(const StridedRef& dst, const StridedRef& src, int index) = 0;
  virtual void fill(const StridedRef& dst, double value, int index) = 0;
  // Waits for all work queued on device `index`.
  virtual void synchronize(int index) = 0;
};

// Installs the backend of a device type (process-wide, before tensors of it exist).
void set_backend(DeviceType type, DeviceBackend* backend);
// The backend of d's type, checking that device d exists; ValueError saying
// why not (braid built without CUDA, or no GPU on this machine) otherwise.
DeviceBackend& backend(Device d);
// Whether tensors can be made on d.
bool available(Device d);

}  // namespace braid
