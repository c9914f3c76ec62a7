#include "braid/tensor/tensor.h"

#include <cstring>

#include "braid/base/copy_bytes.h"
#include "braid/tensor/allocator.h"
#include "braid/tensor/backend.h"
#include "braid/tensor/cpu/cast.h"
#include "braid/tensor/cpu/loops.h"

namespace braid {

Storage::Storage(size_t nbytes, Device device)
    : data_(device.is_cpu() ? CachingAllocator::host().allocate(nbytes) : backend(device).allocate(nbytes, device.index)),
      nbytes_(nbytes),
      device_(device) {}

Storage::Storage(void* data, size_t nbytes, std::function<void(void*)> deleter, Device device)
    : data_(data), nbytes_(nbytes), deleter_(std::move(deleter)), device_(device) {}

std::shared_ptr<Storage> Storage::meta(size_t nbytes) {
  auto s = std::make_shared<Storage>(nullptr, nbytes, [](void*) {});
  s->device_ = Device::meta;
  return s;
}

Storage::~Storage() {
  if (deleter_) {
    deleter_(data_);
  } else if (!device_.is_cpu()) {
    if (data_ != nullptr) backend(device_).deallocate(data_, device_.index);
  } else {
    CachingAllocator::host().deallocate(data_, nbytes_, category_);
  }
}

void Storage::set_category(MemoryCategory c) {
  if (deleter_ || c == category_) return;
  if (data_ != nullptr && device_.is_cpu()) CachingAllocator::host().recategorize(nbytes_, category_, c);
  category_ = c;
}

void Storage::release() {
  if (deleter_) fail<ValueError>("Storage::release: only allocator blocks can be released");
  if (data_ == nullptr) return;
  if (device_.is_cpu()) {
    CachingAllocator::host().deallocate(data_, nbytes_, category_);
  } else {
    backend(device_).deallocate(data_, device_.index);
  }
  data_ = nullptr;
}

void Storage::materialize() {
  if (data_ != nullptr) return;
  data_ = device_.is_cpu() ? CachingAllocator::host().allocate(nbytes_, category_)
                           : backend(device_).allocate(nbytes_, device_.index);
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) {
    if (d < 0) fail<ValueError>("empty: negative dimension in shape {}", braid::to_string(shape));
  }
  Tensor t;
  t.impl_ = std::make_shared<Impl>();
  const size_t nbytes = static_cast<size_t>(braid::numel(shape)) * itemsize(dtype);
  t.impl_->storage = device == Device::meta ? Storage::meta(nbytes) : std::make_shared<Storage>(nbytes, device);
  t.impl_->shape = shape;
  t.impl_->strides = contiguous_strides(shape);
  t.impl_->dtype = dtype;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (device.is_cpu()) {
    std::memset(t.raw_data(), 0, t.nbytes());  // all-zero bits are 0 in every dtype
  } else {
    t.fill(0.0);
  }
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) { return full(shape, 1.0, dtype, device); }

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill(value);
  return t;
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty({n}, dtype);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = cpu::convert<T>(static_cast<double>(i));
  });
  return t;
}

Tensor Tensor::from_blob(void* data, const Shape& shape, DType dtype, std::function<void(void*)> deleter,
                         Device device) {
  Tensor t;
  t.impl_ = std::make_shared<Impl>();
  t.impl_->storage = std::make_shared<Storage>(
      data, static_cast<size_t>(braid::numel(shape)) * itemsize(dtype), std::move(deleter), device);
  t.impl_->shape = shape;
  t.impl_->strides = contiguous_strides(shape);
  t.impl_->dtype = dtype;
  return t;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, ndim(), "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = shape().size(); i-- > 0;) {
    if (shape()[i] != 1 && strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  if (is_meta()) {
    fail<ValueError>("tensor {} {} is on the meta device: it has a shape but no values", name(dtype()),
                     braid::to_string(shape()));
  }
  return static_cast<char*>(impl()->storage->data()) + offset() * static_cast<int64_t>(itemsize(dtype()));
}

void Tensor::set_data(const Tensor& src) const {
  if (src.shape() != shape() || src.dtype() != dtype()) {
    fail<ValueError>("set_data: {} {} cannot take the memory of {} {}", name(dtype()), braid::to_string(shape()),
                     name(src.dtype()), braid::to_string(src.shape()));
  }
  impl()->storage = src.impl()->storage;
  impl()->strides = src.impl()->strides;
  impl()->offset = src.impl()->offset;
}

void Tensor::set_data_and_dtype(const Tensor& src) const {
  if (src.shape() != shape()) {
    fail<ValueError>("set_data_and_dtype: {} {} cannot take the memory of {} {}", name(dtype()),
                     braid::to_string(shape()), name(src.dtype()), braid::to_string(src.shape()));
  }
  impl()->dtype = src.dtype();
  set_data(src);
}

const Tensor& Tensor::set_memory_category(MemoryCategory c) const {
  if (impl()->storage) impl()->storage->set_category(c);
  return *this;
}

Tensor Tensor::as_strided(const Shape& shape, const Shape& strides, int64_t offset) const {
  BRAID_CHECK_EQ(shape.size(), strides.size());
  // Largest element the view can touch must lie inside the storage.
  int64_t last = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) { last = offset - 1; break; }
    last += (shape[i] - 1) * strides[i];
  }
  const auto capacity = static_cast<int64_t>(storage()->nbytes() / itemsize(dtype()));
  if (offset < 0 || last >= capacity) {
    fail<IndexError>("as_strided: view {} strides {} offset {} exceeds storage of {} elements",
                     braid::to_string(shape), braid::to_string(strides), offset, capacity);
  }
  Tensor t;
  t.impl_ = std::make_shared<Impl>();
  t.impl_->storage = storage();
  t.impl_->shape = shape;
  t.impl_->strides = strides;
  t.impl_->offset = offset;
  t.impl_->dtype = dtype();
  return t;
}

Tensor Tensor::detach() const { return as_strided(shape(), strides(), offset()); }

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_from(*this);
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor out = empty(shape(), target, device());
  out.copy_from(*this);
  return out;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor out = empty(shape(), dtype(), target);
  out.copy_from(*this);
  return out;
}

namespace {
StridedRef strided_ref(const Tensor& t) {
  return StridedRef{t.raw_data(), t.shape(), t.strides(), t.dtype()};
}
}  // namespace

void Tensor::copy_from(const Tensor& src) const {
  if (src.shape() != shape()) {
    fail<ValueError>("copy: source shape {} does not match destination shape {}",
                     braid::to_string(src.shape()), braid::to_string(shape()));
  }
  if (is_meta()) return;
  if (src.is_meta()) fail<ValueError>("copy: a meta tensor has no values to copy into a {} tensor", name(device()));
  if (numel() == 0) return;
  if (src.device() != device()) {
    // Across devices only whole contiguous buffers of one dtype move; any
    // conversion or gather happens on one side first.
    if (src.dtype() != dtype() || !src.is_contiguous()) {
      return copy_from(src.to(dtype()).contiguous());
    }
    if (!is_contiguous()) {
      Tensor staged = empty(shape(), dtype(), device());
      staged.copy_from(src);
      return copy_from(staged);
    }
    const Device accel = device().is_cpu() ? src.device() : device();
    return backend(accel).copy_bytes(raw_data(), device(), src.raw_data(), src.device(), nbytes());
  }
  if (!device().is_cpu()) {
    if (numel() == 0) return;
    if (src.dtype() == dtype() && src.is_contiguous() && is_contiguous()) {
      if (raw_data() != src.raw_data()) backend(device()).copy_bytes(raw_data(), device(), src.raw_data(), device(), nbytes());
      return;
    }
    return backend(device()).copy_strided(strided_ref(*this), strided_ref(src), device().index);
  }
  if (src.dtype() == dtype() && src.is_contiguous() && is_contiguous()) {
    auto* d = static_cast<std::byte*>(raw_data());
    const auto* s = static_cast<const std::byte*>(src.raw_data());
    const size_t n = nbytes();
    if (d + n <= s || s + n <= d) {
      copy_bytes(d, s, n);  // also the gradient into its data-parallel bucket, every step
    } else if (d != s) {
      std::memmove(d, s, n);
    }
    return;
  }
  // f32 <-> bf16 between contiguous buffers is every mixed-precision product's
  // operand conversion: the vectorised kernel, not the strided loop below.
  if (src.is_contiguous() && is_contiguous()) {
    if (src.dtype() == DType::f32 && dtype() == DType::bf16) {
      return cpu::cast_f32_to_bf16(static_cast<const float*>(src.raw_data()), static_cast<bf16*>(raw_data()), numel());
    }
    if (src.dtype() == DType::bf16 && dtype() == DType::f32) {
      return cpu::cast_bf16_to_f32(static_cast<const bf16*>(src.raw_data()), static_cast<float*>(raw_data()), numel());
    }
  }
  visit_dtype(dtype(), [&](auto dzero) {
    using D = decltype(dzero);
    visit_dtype(src.dtype(), [&](auto szero) {
      using S = decltype(szero);
      D* dp = static_cast<D*>(impl()->storage->data());
      const S* sp = static_cast<const S*>(src.storage()->data());
      cpu::strided_loop<2>(shape(), {strides(), src.strides()}, {offset(), src.offset()},
                           [&](std::array<int64_t, 2> off, int64_t n, std::array<int64_t, 2> st) {
                             D* d = dp + off[0];
                             const S* s = sp + off[1];
                             for (int64_t i = 0; i < n; ++i) d[i * st[0]] = cpu::convert<D>(s[i * st[1]]);
                           });
    });
  });
}

void Tensor::fill(double value) const {
  if (is_meta()) return;
  if (!device().is_cpu()) {
    if (numel() > 0) backend(device()).fill(strided_ref(*this), value, device().index);
    return;
  }
  visit_dtype(dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T v = cpu::convert<T>(value);
    T* p = static_cast<T*>(impl()->storage->data());
    cpu::strided_loop<1>(shape(), {strides()}, {offset()},
                         [&](std::array<int64_t, 1> off, int64_t n, std::array<int64_t, 1> st) {
                           for (int64_t i = 0; i < n; ++i) p[off[0] + i * st[0]] = v;
                         });
  });
}

double Tensor::item() const {
  if (numel() != 1) fail<ValueError>("item: tensor of shape {} has {} elements, not 1", braid::to_string(shape()), numel());
  if (!device().is_cpu()) return to(Device::cpu).item();
  return visit_dtype(dtype(), [&](auto zero) {
    using T = decltype(zero);
    return cpu::convert<double>(*static_cast<const T*>(raw_data()));
  });
}

const Tensor& Tensor::set_requires_grad(bool on) const {
  if (on && !is_floating(dtype())) {
    fail<ValueError>("requires_grad: only floating tensors can require gradients, not {}", name(dtype()));
  }
  if (!is_leaf()) fail<ValueError>("requires_grad: can only be set on leaf tensors");
  impl()->grad.requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const {
  GradMeta& m = impl()->grad;
  if (!m.grad) return Tensor();
  if (m.grad_is_zero && !m.grad->is_meta()) {
    m.grad->fill(0.0);
    m.grad_is_zero = false;
  }
  return *m.grad;
}

bool Tensor::sole_owner() const {
  return impl_.use_count() == 1 && impl()->storage.use_count() == 1 && impl()->offset == 0 &&
         is_contiguous() && nbytes() == impl()->storage->nbytes();
}

void Tensor::zero_grad() const {
  if (impl()->grad.grad) impl()->grad.grad_is_zero = true;
}

void Tensor::set_grad(const Tensor& g) const {
  impl()->grad.grad_is_zero = false;
  if (!g.defined()) {
    impl()->grad.grad.reset();
    return;
  }
  if (g.shape() != shape()) {
    fail<ValueError>("set_grad: gradient shape {} does not match tensor shape {}", braid::to_string(g.shape()),
                     braid::to_string(shape()));
  }
  g.set_memory_category(MemoryCategory::gradients);
  impl()->grad.grad = std::make_shared<Tensor>(g);
}

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "Tensor(undefined)";
  std::string s = fmt::format("Tensor({} {}", name(t.dtype()), to_string(t.shape()));
  if (t.is_meta()) return s + " meta)";
  if (!t.device().is_cpu()) s += " " + name(t.device());
  if (t.numel() <= 16) {
    s += fmt::format(" {}", t.to_vector<double>());
  }
  return s + ")";
}

}  // namespace braid
