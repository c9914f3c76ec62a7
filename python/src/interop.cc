// Zero-copy exchange (docs/python.md, "Tensors and numpy, PyTorch"):
//
//   braid.Tensor exports the buffer protocol, so numpy.asarray(t) (and
//   t.numpy()) is a view of the tensor's memory; the view holds the Tensor
//   object, so the memory lives as long as any view of it does.
//   braid.from_numpy(a) wraps any writable buffer (numpy arrays, memoryviews)
//   and holds the buffer until the last braid view of it dies.
//   __dlpack__ / __dlpack_device__ and braid.from_dlpack exchange tensors with
//   PyTorch, JAX, CuPy or numpy, on the host or (where braid is built with
//   CUDA) a GPU, without copying.
//
// A buffer's memory is written by braid ops in place: a read-only array is
// refused (braid.tensor copies it instead).
#include <cstring>
#include <memory>

#include "bindings.h"

namespace braid::python {

namespace {

// The DLPack ABI (dmlc/dlpack, v0.8 "legacy" layout, which every consumer
// reads): declared here since it is eight fields and never changes.
struct DLDevice {
  int32_t device_type;  // kDLCPU = 1, kDLCUDA = 2
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2;

DLDataType dl_dtype(DType d) {
  switch (d) {
    case DType::f32: return {2, 32, 1};
    case DType::f64: return {2, 64, 1};
    case DType::f16: return {2, 16, 1};
    case DType::bf16: return {4, 16, 1};
    case DType::i32: return {0, 32, 1};
    case DType::i64: return {0, 64, 1};
    case DType::u8: return {1, 8, 1};
    case DType::b8: return {6, 8, 1};
  }
  return {2, 32, 1};
}

DType from_dl_dtype(DLDataType t) {
  if (t.lanes != 1) fail<ValueError>("from_dlpack: vector dtypes ({} lanes) are not supported", t.lanes);
  const int key = t.code * 1000 + t.bits;
  switch (key) {
    case 2032: return DType::f32;
    case 2064: return DType::f64;
    case 2016: return DType::f16;
    case 4016: return DType::bf16;
    case 32: return DType::i32;
    case 64: return DType::i64;
    case 1008: return DType::u8;
    case 6008: return DType::b8;
    case 1001: return DType::b8;  // some producers mark bool as 1-bit unsigned
  }
  fail<ValueError>("from_dlpack: DLPack dtype (code {}, {} bits) has no braid dtype (f32, f64, f16, bf16, i32, i64, "
                   "u8, bool)", t.code, t.bits);
}

// What a capsule owns: a handle of the tensor (so its storage lives) and the
// arrays DLTensor points at.
struct Exported {
  DLManagedTensor managed{};
  Tensor tensor;
  std::vector<int64_t> shape, strides;
};

void delete_exported(DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); }

void capsule_destructor(PyObject* capsule) {
  // Renamed to "used_dltensor" by a consumer, which then owns it.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  } else {
    PyErr_Clear();
  }
}

nb::object to_dlpack(const Tensor& t, nb::handle stream, nb::handle max_version, nb::handle dl_device,
                     nb::handle copy) {
  if (t.is_meta()) fail<ValueError>("__dlpack__: a meta tensor has no memory to share");
  if (t.storage()->released()) fail<ValueError>("__dlpack__: the tensor's memory is released");
  if (!copy.is_none() && nb::cast<bool>(copy)) fail<ValueError>("__dlpack__: braid shares memory only (copy=True)");
  if (!dl_device.is_none()) {
    nb::tuple want = nb::cast<nb::tuple>(dl_device);
    const int type = nb::cast<int>(want[0]), id = nb::cast<int>(want[1]);
    const bool here = t.device().is_cpu() ? type == kDLCPU : (type == kDLCUDA && id == t.device().index);
    if (!here) fail<ValueError>("__dlpack__: the tensor is on {}, not on DLPack device ({}, {})", name(t.device()), type, id);
  }
  auto* e = new Exported;
  e->tensor = t;
  e->shape = t.shape();
  e->strides = t.strides();
  DLTensor& d = e->managed.dl_tensor;
  d.data = t.numel() > 0 ? t.raw_data() : nullptr;
  d.device = t.device().is_cpu() ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, t.device().index};
  d.ndim = static_cast<int32_t>(t.ndim());
  d.dtype = dl_dtype(t.dtype());
  d.shape = e->shape.data();
  d.strides = e->strides.data();
  d.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = delete_exported;
  PyObject* cap = PyCapsule_New(&e->managed, "dltensor", capsule_destructor);
  if (!cap) {
    delete e;
    throw nb::python_error();
  }
  return nb::steal(cap);
}

Tensor from_capsule(nb::handle capsule) {
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!m) {
    PyErr_Clear();
    fail<ValueError>("from_dlpack: expected an unused 'dltensor' capsule (or an object with __dlpack__)");
  }
  const DLTensor& d = m->dl_tensor;
  Device device = Device::cpu;
  if (d.device.device_type == kDLCUDA) {
    device = Device::cuda(d.device.device_id);
  } else if (d.device.device_type != kDLCPU && d.device.device_type != 3 /* kDLCUDAHost */) {
    fail<ValueError>("from_dlpack: DLPack device type {} is neither the host nor CUDA", d.device.device_type);
  }
  const DType dtype = from_dl_dtype(d.dtype);
  Shape shape(d.shape, d.shape + d.ndim);
  Shape strides = d.strides ? Shape(d.strides, d.strides + d.ndim) : contiguous_strides(shape);
  int64_t extent = numel(shape) > 0 ? 1 : 0;  // elements from the first to the last one, inclusive
  for (int i = 0; i < d.ndim; ++i) {
    if (strides[i] < 0) fail<ValueError>("from_dlpack: negative strides are not supported");
    if (shape[i] > 0 && extent > 0) extent += (shape[i] - 1) * strides[i];
  }
  // The capsule is ours from here: its deleter runs when the last view dies.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  void* data = d.data ? static_cast<char*>(d.data) + d.byte_offset : nullptr;
  Tensor base = Tensor::from_blob(data, {extent}, dtype, [m](void*) {
        if (m->deleter) m->deleter(m);
      }, device);
  return base.as_strided(shape, strides, 0);
}

Tensor from_dlpack(nb::handle obj) {
  if (PyCapsule_CheckExact(obj.ptr())) return from_capsule(obj);
  if (!nb::hasattr(obj, "__dlpack__"))
    fail<ValueError>("from_dlpack: {} has no __dlpack__", nb::cast<std::string>(nb::str(obj.type().attr("__name__"))));
  nb::object capsule = obj.attr("__dlpack__")();
  return from_capsule(capsule);
}

// numpy's buffer format -> dtype ('<f', '=q', '?', ...).
DType from_format(const char* format) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@')) f = f.substr(1);
  if (f.size() == 1) {
    switch (f[0]) {
      case 'f': return DType::f32;
      case 'd': return DType::f64;
      case 'e': return DType::f16;
      case 'i': return DType::i32;
      case 'l': case 'q': return DType::i64;
      case 'B': return DType::u8;
      case '?': return DType::b8;
    }
  }
  fail<ValueError>("from_numpy: buffer format '{}' has no braid dtype (float32, float64, float16, int32, int64, "
                   "uint8, bool in native byte order)", format ? format : "");
}

Tensor from_buffer(nb::handle obj) {
  auto view = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_RECORDS) != 0) {
    // Read-only memory (or no buffer at all): say what to do instead.
    nb::python_error e;
    const bool readonly = PyObject_CheckBuffer(obj.ptr()) != 0;
    if (readonly)
      fail<ValueError>("from_numpy: the buffer is read-only and braid writes tensors in place; braid.tensor(a) "
                       "copies it ({})", e.what());
    fail<ValueError>("from_numpy: {} does not export the buffer protocol",
                     nb::cast<std::string>(nb::str(obj.type().attr("__name__"))));
  }
  std::unique_ptr<Py_buffer, void (*)(Py_buffer*)> guard(view.release(), [](Py_buffer* v) {
    PyBuffer_Release(v);
    delete v;
  });
  Py_buffer& v = *guard;
  const DType dtype = from_format(v.format);
  if (static_cast<size_t>(v.itemsize) != itemsize(dtype))
    fail<ValueError>("from_numpy: items of {} bytes for dtype {}", v.itemsize, name(dtype));
  Shape shape(v.shape, v.shape + v.ndim), strides(v.ndim);
  int64_t extent = v.len > 0 || numel(shape) > 0 ? 1 : 0;
  for (int i = 0; i < v.ndim; ++i) {
    if (v.strides[i] < 0 || v.strides[i] % v.itemsize != 0)
      fail<ValueError>("from_numpy: strides {} bytes are not a non-negative multiple of the item size {}",
                       v.strides[i], v.itemsize);
    strides[i] = v.strides[i] / v.itemsize;
    if (numel(shape) == 0) extent = 0;
    if (extent > 0) extent += (shape[i] - 1) * strides[i];
  }
  Py_buffer* held = guard.release();
  // The deleter may run on any thread (the last view can die inside C++):
  // it takes the GIL, unless the interpreter is gone.
  Tensor base = Tensor::from_blob(v.buf, {extent}, dtype, [held](void*) {
    if (!Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    PyBuffer_Release(held);
    delete held;
  });
  return base.as_strided(shape, strides, 0);
}

// The buffer protocol of braid.Tensor: host tensors of every dtype but bf16
// (which has no buffer format; .to(braid.float32) first).
struct BufferArrays {
  std::vector<Py_ssize_t> shape, strides;
};

const char* format_of(DType d) {
  switch (d) {
    case DType::f32: return "f";
    case DType::f64: return "d";
    case DType::f16: return "e";
    case DType::i32: return "i";
    case DType::i64: return "q";
    case DType::u8: return "B";
    case DType::b8: return "?";
    case DType::bf16: return nullptr;
  }
  return nullptr;
}

int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = nullptr;
  if (!nb::inst_ready(self)) {
    PyErr_SetString(PyExc_BufferError, "braid.Tensor is not initialised");
    return -1;
  }
  const Tensor& t = *nb::inst_ptr<Tensor>(self);
  try {
    if (!t.defined()) fail<ValueError>("undefined tensor");
    if (!t.device().is_cpu())
      fail<ValueError>("the tensor is on {}; .cpu() copies it to the host (or use __dlpack__)", name(t.device()));
    if (t.storage()->released()) fail<ValueError>("the tensor's memory is released");
    const char* format = format_of(t.dtype());
    if (!format) fail<ValueError>("bf16 has no buffer format; .to(braid.float32) first");
    const bool contiguous = t.is_contiguous();
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !contiguous)
      fail<ValueError>("the tensor is not contiguous and the consumer asked for no strides");
    if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !contiguous)
      fail<ValueError>("the tensor is not C-contiguous (.contiguous() first)");
    if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !(contiguous && t.ndim() <= 1))
      fail<ValueError>("braid tensors are not Fortran-ordered");
    auto* arrays = new BufferArrays;
    const Py_ssize_t item = static_cast<Py_ssize_t>(itemsize(t.dtype()));
    for (int64_t d = 0; d < t.ndim(); ++d) {
      arrays->shape.push_back(t.shape()[d]);
      arrays->strides.push_back(t.strides()[d] * item);
    }
    view->buf = t.numel() > 0 ? t.raw_data() : static_cast<void*>(arrays);  // any valid pointer when empty
    view->len = static_cast<Py_ssize_t>(t.nbytes());
    view->readonly = 0;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(format) : nullptr;
    view->ndim = static_cast<int>(t.ndim());
    view->shape = (flags & PyBUF_ND) ? arrays->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? arrays->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = arrays;
    view->obj = self;
    Py_INCREF(self);
    return 0;
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_BufferError, "braid.Tensor: %s", e.what());
    return -1;
  }
}

void tensor_releasebuffer(PyObject*, Py_buffer* view) { delete static_cast<BufferArrays*>(view->internal); }

// numpy.asarray over the buffer protocol, after the checks that make a
// tensor exportable (raised as braid errors, not a BufferError numpy hides).
nb::object numpy_view(nb::handle self) {
  const Tensor& t = nb::cast<const Tensor&>(self);
  if (t.is_meta()) fail<ValueError>("numpy: a meta tensor has a shape but no values");
  if (!t.device().is_cpu()) fail<ValueError>("numpy: the tensor is on {}; .cpu() copies it to the host", name(t.device()));
  if (t.storage()->released()) fail<ValueError>("numpy: the tensor's memory is released");
  if (t.dtype() == DType::bf16) fail<ValueError>("numpy: numpy has no bfloat16; .to(braid.float32) first");
  nb::object view = nb::steal(PyMemoryView_FromObject(self.ptr()));
  if (!view.is_valid()) throw nb::python_error();
  return nb::module_::import_("numpy").attr("asarray")(view);
}

PyType_Slot slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(tensor_getbuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(tensor_releasebuffer)},
    {0, nullptr},
};

}  // namespace

PyType_Slot* tensor_type_slots() { return slots; }

void bind_interop(nb::module_& m, TensorClass& t) {
  t.def("__dlpack__", &to_dlpack, "stream"_a = nb::none(), "max_version"_a = nb::none(), "dl_device"_a = nb::none(),
        "copy"_a = nb::none(),
        "A DLPack capsule sharing this tensor's memory (torch.from_dlpack(t), numpy.from_dlpack(t)).")
      .def("numpy", [](nb::handle self) { return numpy_view(self); },
           "A numpy view of this host tensor's memory (no copy): writes through either show in the other, and "
           "the view keeps the memory alive after the tensor is gone.")
      // numpy tries the buffer protocol first; when that fails it would
      // quietly make an object array, so __array__ says why instead.
      .def("__array__", [](nb::handle self, nb::handle dtype, nb::handle copy) {
        nb::object a = numpy_view(self);
        if (!dtype.is_none()) a = a.attr("astype")(dtype);
        return a;
      }, "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def("tolist", [](const Tensor& x) {
        Tensor host = x.detach().to(Device::cpu);
        if (host.dtype() == DType::bf16) host = host.to(DType::f32);
        return nb::module_::import_("numpy").attr("asarray")(nb::cast(host)).attr("tolist")();
      }, "The values as nested Python lists (a copy).")
      .def("__dlpack_device__", [](const Tensor& x) {
        if (x.is_meta()) fail<ValueError>("__dlpack_device__: a meta tensor has no memory");
        return x.device().is_cpu() ? nb::make_tuple(kDLCPU, 0) : nb::make_tuple(kDLCUDA, static_cast<int>(x.device().index));
      });
  m.def("from_dlpack", &from_dlpack, "obj"_a,
        "A tensor sharing the memory of any DLPack producer (a torch.Tensor, a numpy array, a capsule). The "
        "producer's memory stays alive as long as the braid tensor or any view of it does.");
  m.def("from_numpy", &from_buffer, "array"_a,
        "A tensor sharing the memory of a writable numpy array (or any buffer): writes through either show in "
        "the other. Read-only arrays are refused; braid.tensor copies.");
}

}  // namespace braid::python
