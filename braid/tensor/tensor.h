// Tensor: a cheap handle to shared storage with shape, strides, offset and
// dtype. Copies of a Tensor share everything; views (as_strided) share the
// storage. Autograd state lives in GradMeta, held by the handle so that every
// copy sees the same requires_grad / grad / grad_fn. Differentiable operations
// are free functions in braid/ops; this layer knows nothing about them.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "braid/base/error.h"
#include "braid/tensor/allocator.h"
#include "braid/tensor/device.h"
#include "braid/tensor/dtype.h"
#include "braid/tensor/shape.h"

namespace braid {

namespace autograd {
class Node;
}

class Tensor;

// One allocation. Owns a block of the host's caching allocator or of a
// device's backend, or wraps foreign memory with a deleter.
class Storage {
 public:
  explicit Storage(size_t nbytes, Device device = Device::cpu);
  // Foreign memory on `device` (a DLPack producer's GPU tensor, for one).
  Storage(void* data, size_t nbytes, std::function<void(void*)> deleter, Device device = Device::cpu);
  // A block on the meta device: a size and no memory.
  static std::shared_ptr<Storage> meta(size_t nbytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // Null while released, and always on the meta device.
  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // What the block holds (allocator.h); foreign and device memory is not counted.
  MemoryCategory category() const { return category_; }
  void set_category(MemoryCategory c);

  // Gives the block back while every tensor on this storage keeps its place
  // (ZeRO stage 3 frees gathered parameters between their uses; autograd's
  // saved tensors see the values again once materialize() refills them).
  // Only for allocator blocks. materialize() leaves values undefined.
  void release();
  void materialize();
  bool released() const { return data_ == nullptr && nbytes_ > 0; }

 private:
  void* data_;
  size_t nbytes_;
  std::function<void(void*)> deleter_;  // empty: caching allocator block
  MemoryCategory category_ = MemoryCategory::other;
  Device device_ = Device::cpu;
};

// Autograd state of a tensor (the engine in braid/autograd reads and writes it).
struct GradMeta {
  bool requires_grad = false;
  std::shared_ptr<Tensor> grad;                // accumulated gradient of a leaf
  // `grad` holds stale values that count as zeros (zero_grad() keeps the
  // buffer): the next backward overwrites it instead of adding, which saves
  // a fill and a read per step; grad() zero-fills it if read before that.
  bool grad_is_zero = false;
  std::shared_ptr<autograd::Node> grad_fn;     // producer of a non-leaf
  // Hooks that fire once this leaf's gradient is final for the current
  // backward pass (data parallelism starts communication from them).
  std::vector<std::function<void(Tensor&)>> grad_ready_hooks;
};

class Tensor {
 public:
  Tensor() = default;  // undefined

  // Creation. Values are uninitialised for empty(); a meta tensor has none.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32, Device device = Device::cpu);
  static Tensor scalar(double value, DType dtype = DType::f32) { return full({}, value, dtype); }
  // 0, 1, ..., n-1
  static Tensor arange(int64_t n, DType dtype = DType::f32);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // Wraps memory braid does not own, on `device`; `deleter` runs when the last view dies.
  static Tensor from_blob(void* data, const Shape& shape, DType dtype,
                          std::function<void(void*)> deleter = [](void*) {}, Device device = Device::cpu);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl()->shape; }
  const Shape& strides() const { return impl()->strides; }
  int64_t offset() const { return impl()->offset; }
  DType dtype() const { return impl()->dtype; }
  Device device() const { return impl()->storage->device(); }
  bool is_meta() const { return device() == Device::meta; }
  int64_t ndim() const { return static_cast<int64_t>(impl()->shape.size()); }
  // Size of dimension d (negative counts from the end).
  int64_t size(int64_t d) const;
  int64_t numel() const { return braid::numel(impl()->shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl()->storage; }
  // Identity: true when both handles are the same tensor (not merely equal values).
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

  // Pointer to the first element; checks that T matches the dtype. A meta
  // tensor has no elements to point at: these throw.
  template <class T>
  T* data() const;
  void* raw_data() const;

  // Points this tensor (every handle of it) at `src`'s memory, which must have
  // the same shape and dtype; autograd state stays. ZeRO uses it to place
  // parameters inside the flat buffers it communicates.
  void set_data(const Tensor& src) const;
  // set_data where `src` may have another dtype, which this tensor (every
  // handle of it) then takes: Module::to(DType) converts a model in place.
  void set_data_and_dtype(const Tensor& src) const;
  // Labels this tensor's storage for the allocator's per-category figures.
  const Tensor& set_memory_category(MemoryCategory c) const;

  // A view sharing storage. Offsets and strides are in elements.
  Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;
  // This tensor's values in a fresh contiguous buffer (no autograd).
  Tensor clone() const;
  // The same values without autograd history (shares storage). Backward
  // closures save detached tensors so a result never owns its own grad_fn.
  Tensor detach() const;
  // Itself when contiguous, else clone().
  Tensor contiguous() const;
  // Converted copy (itself when the dtype already matches).
  Tensor to(DType dtype) const;
  // A contiguous copy on `device` (itself when already there); no autograd.
  Tensor to(Device device) const;
  // Copies src's values into this tensor (shapes must match; dtypes and
  // devices may differ). Into a meta tensor only the shapes are checked.
  void copy_from(const Tensor& src) const;
  void fill(double value) const;
  // The value of a one-element tensor.
  double item() const;
  template <class T>
  std::vector<T> to_vector() const;

  // Autograd state shared by every copy of the handle.
  bool requires_grad() const { return impl_ && impl()->grad.requires_grad; }
  const Tensor& set_requires_grad(bool on = true) const;
  // The accumulated gradient (undefined before the first backward).
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  // Makes the gradient zero while keeping its buffer (and views of it, such
  // as a data-parallel bucket); the memory is not touched until needed.
  void zero_grad() const;
  GradMeta& grad_meta() const { return impl()->grad; }
  // No other handle or view reaches this tensor's memory, and the tensor is
  // all of it: whoever holds this handle may keep the buffer as its own.
  bool sole_owner() const;
  bool is_leaf() const { return !impl()->grad.grad_fn; }

 private:
  struct Impl {
    std::shared_ptr<Storage> storage;
    Shape shape, strides;
    int64_t offset = 0;
    DType dtype = DType::f32;
    GradMeta grad;
  };
  Impl* impl() const {
    BRAID_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return impl_.get();
  }
  std::shared_ptr<Impl> impl_;
};

template <class T>
T* Tensor::data() const {
  if (dtype_of<T>() != dtype()) {
    fail<ValueError>("tensor of dtype {} accessed as {}", name(dtype()), name(dtype_of<T>()));
  }
  return static_cast<T*>(raw_data());
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != braid::numel(shape)) {
    fail<ValueError>("from_vector: {} values do not fill shape {}", values.size(), to_string(shape));
  }
  Tensor t = empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = to(Device::cpu).to(dtype_of<T>()).contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

std::string to_string(const Tensor& t);

}  // namespace braid
