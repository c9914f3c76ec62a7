// braid.dtype, braid.Device and braid.Tensor's own attributes: shape, dtype,
// device, autograd state, conversions and creation. Operators and ops are in
// ops.cc; numpy and DLPack exchange in interop.cc.
#include <cstring>

#include "bindings.h"
#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
#include "braid/nn/init.h"
#include "braid/ops/shape.h"
#include "braid/ops/tensor_ops.h"

namespace braid::python {

DType to_dtype(nb::handle h) {
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  std::string text;
  if (nb::isinstance<nb::str>(h)) {
    text = nb::cast<std::string>(h);
  } else if (nb::hasattr(h, "name") && nb::hasattr(h, "itemsize")) {  // a numpy dtype
    text = nb::cast<std::string>(h.attr("name"));
  } else if (nb::hasattr(h, "dtype") && nb::hasattr(h, "type")) {  // numpy.float32 and the like
    text = nb::cast<std::string>(nb::module_::import_("numpy").attr("dtype")(h).attr("name"));
  } else {
    text = nb::cast<std::string>(nb::str(h));  // torch.float32
  }
  if (text.starts_with("torch.")) text = text.substr(6);
  static const std::pair<const char*, DType> names[] = {
      {"f32", DType::f32},   {"float32", DType::f32}, {"float", DType::f32},    {"f64", DType::f64},
      {"float64", DType::f64}, {"double", DType::f64}, {"f16", DType::f16},     {"float16", DType::f16},
      {"half", DType::f16},  {"bf16", DType::bf16},   {"bfloat16", DType::bf16}, {"i32", DType::i32},
      {"int32", DType::i32}, {"int", DType::i32},     {"i64", DType::i64},      {"int64", DType::i64},
      {"long", DType::i64},  {"u8", DType::u8},       {"uint8", DType::u8},     {"bool", DType::b8},
      {"b8", DType::b8}};
  for (const auto& [name, dtype] : names)
    if (text == name) return dtype;
  fail<ValueError>("unknown dtype '{}' (braid has f32, f64, f16, bf16, i32, i64, u8, bool)", text);
}

Device to_device(nb::handle h) {
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (nb::isinstance<nb::str>(h)) return parse_device(nb::cast<std::string>(h));
  // torch.device and the like print as their name.
  return parse_device(nb::cast<std::string>(nb::str(h)));
}

Shape to_shape(nb::handle h) {
  if (PyLong_Check(h.ptr())) return {nb::cast<int64_t>(h)};
  Shape s;
  for (nb::handle d : h) {
    if (!PyLong_Check(d.ptr()) && !PyIndex_Check(d.ptr()))
      fail<ValueError>("a shape holds ints, got {}", nb::cast<std::string>(nb::repr(d)));
    s.push_back(nb::cast<int64_t>(d));
  }
  return s;
}

std::vector<int64_t> to_dims(nb::handle h) { return to_shape(h); }

nb::tuple to_tuple(const Shape& s) {
  PyObject* t = PyTuple_New(static_cast<Py_ssize_t>(s.size()));
  for (size_t i = 0; i < s.size(); ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(s[i]));
  return nb::steal<nb::tuple>(t);
}

namespace {

// A shape given as f(2, 3) or f((2, 3)).
Shape shape_of_args(const nb::args& args) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return to_shape(args[0]);
  return to_shape(args);
}

DType dtype_or(const nb::handle& h, DType fallback) { return h.is_none() ? fallback : to_dtype(h); }
Device device_or(const nb::handle& h) { return h.is_none() ? Device::cpu : to_device(h); }

}  // namespace

void bind_types(nb::module_& m) {
  nb::enum_<DType>(m, "dtype", "Element types: float32, float64, float16, bfloat16, int32, int64, uint8, bool.")
      .value("float32", DType::f32)
      .value("float64", DType::f64)
      .value("float16", DType::f16)
      .value("bfloat16", DType::bf16)
      .value("int32", DType::i32)
      .value("int64", DType::i64)
      .value("uint8", DType::u8)
      .value("bool", DType::b8)
      .def_prop_ro("itemsize", [](DType d) { return itemsize(d); }, "Bytes per element.")
      .def_prop_ro("is_floating_point", [](DType d) { return is_floating(d); });

  nb::class_<Device>(m, "Device", "Where a tensor's values live: 'cpu', 'cuda:N', or 'meta' (a shape, no memory).")
      .def("__init__", [](Device* d, const std::string& name) { new (d) Device(parse_device(name)); },
           nb::arg("name"))
      .def_prop_ro("type", [](const Device& d) { return std::string(name(d.type)); })
      .def_prop_ro("index", [](const Device& d) { return static_cast<int>(d.index); })
      .def("__str__", [](const Device& d) { return name(d); })
      .def("__repr__", [](const Device& d) { return "braid.Device('" + name(d) + "')"; })
      .def("__eq__", [](const Device& a, nb::handle b) {
        try {
          return a == to_device(b);
        } catch (const std::exception&) {
          return false;
        }
      })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 256 + d.index; });

  nb::class_<Generator>(m, "Generator",
                        "braid's Philox counter-based generator: its whole state is (seed, stream, offset), so "
                        "the same seed draws the same values on every machine and thread count.")
      .def(nb::init<uint64_t, uint64_t>(), "seed"_a = 0, "stream"_a = 0)
      .def_prop_ro("seed", &Generator::seed)
      .def("state", [](const Generator& g) {
        const Generator::State s = g.state();
        return nb::make_tuple(s.seed, s.stream, s.offset);
      }, "(seed, stream, offset)")
      .def("set_state", [](Generator& g, uint64_t seed, uint64_t stream, uint64_t offset) {
        g.set_state({seed, stream, offset});
      }, "seed"_a, "stream"_a, "offset"_a)
      .def("uniform", [](Generator& g) { return g.uniform_f64(); }, "One draw in [0, 1).")
      .def("normal", &Generator::normal, "One standard normal draw.");
}

void bind_tensor(nb::module_& m, TensorClass& t) {
  t.def_prop_ro("shape", [](const Tensor& x) { return to_tuple(x.shape()); })
      .def_prop_ro("dtype", &Tensor::dtype)
      .def_prop_ro("device", &Tensor::device)
      .def_prop_ro("ndim", &Tensor::ndim)
      .def_prop_ro("strides", [](const Tensor& x) { return to_tuple(x.strides()); }, "Strides in elements.")
      .def_prop_ro("offset", &Tensor::offset, "Offset of the first element in its storage, in elements.")
      .def("numel", &Tensor::numel)
      .def("dim", &Tensor::ndim)
      .def("size", [](const Tensor& x, std::optional<int64_t> d) -> nb::object {
             if (d) return nb::int_(x.size(*d));
             return to_tuple(x.shape());
           }, nb::arg("dim") = nb::none())
      .def_prop_ro("nbytes", &Tensor::nbytes)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("__len__", [](const Tensor& x) {
        if (x.ndim() == 0) fail<ValueError>("len() of a 0-d tensor");
        return x.size(0);
      })
      .def_prop_rw(
          "requires_grad", &Tensor::requires_grad,
          [](Tensor& x, bool on) { x.set_requires_grad(on); },
          "Whether ops on this tensor record autograd history (leaves: whether backward fills .grad).")
      .def("requires_grad_", [](Tensor& x, bool on) { x.set_requires_grad(on); return x; },
           nb::arg("requires_grad") = true)
      .def_prop_rw(
          "grad",
          [](const Tensor& x) -> std::optional<Tensor> {
            Tensor g = x.grad();
            if (!g.defined()) return std::nullopt;
            return g;
          },
          [](Tensor& x, std::optional<Tensor> g) {
            if (g) {
              if (g->shape() != x.shape())
                fail<ValueError>("grad of shape {} for a tensor of shape {}", to_string(g->shape()),
                                 to_string(x.shape()));
              x.set_grad(*g);
            } else {
              x.grad_meta().grad.reset();
            }
          },
          "The accumulated gradient of a leaf (None before the first backward).")
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_ro("grad_fn", [](const Tensor& x) -> std::optional<std::string> {
        if (x.is_leaf()) return std::nullopt;
        return x.grad_meta().grad_fn->name();
      }, "The name of the op that made this tensor (None for a leaf).")
      .def("zero_grad", &Tensor::zero_grad)
      .def("detach", &Tensor::detach, "The same values, sharing storage, without autograd history.")
      .def("clone", [](const Tensor& x) { return clone(x); }, release_gil(),
           "A copy in fresh memory; differentiable.")
      .def("contiguous", [](const Tensor& x) { return contiguous(x); }, release_gil())
      .def("same", &Tensor::same, nb::arg("other"), "True when both are handles of one tensor.")
      .def("shares_memory", [](const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); },
           nb::arg("other"), "True when both are views of one storage.")
      .def("item", [](const Tensor& x) -> nb::object {
        const double v = x.item();
        if (is_floating(x.dtype())) return nb::float_(v);
        if (x.dtype() == DType::b8) return nb::bool_(v != 0);
        return nb::int_(static_cast<int64_t>(v));
      })
      .def("__float__", [](const Tensor& x) { return x.item(); })
      .def("__int__", [](const Tensor& x) { return static_cast<int64_t>(x.item()); })
      .def("__index__", [](const Tensor& x) {
        if (is_floating(x.dtype())) fail<ValueError>("a {} tensor is not an index", name(x.dtype()));
        return static_cast<int64_t>(x.item());
      })
      .def("__bool__", [](const Tensor& x) {
        if (x.numel() != 1)
          fail<ValueError>("the truth value of a tensor of {} elements is ambiguous (use .any() or .all())",
                           x.numel());
        return x.item() != 0;
      })
      .def("__repr__", [](const Tensor& x) { return to_string(x); })
      .def("__hash__", [](nb::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); })
      .def("to", [](const Tensor& x, nb::handle target, std::optional<DType> dtype) {
             Tensor out = x;
             if (nb::isinstance<DType>(target)) {
               nb::gil_scoped_release r;
               return cast(out, nb::cast<DType>(target));
             }
             const Device dev = to_device(target);
             nb::gil_scoped_release r;
             out = out.to(dev);
             if (dtype) out = cast(out, *dtype);
             return out;
           }, nb::arg("target"), nb::arg("dtype") = nb::none(),
           "A copy on a device ('cpu', 'cuda:0') or of a dtype; itself when nothing changes. A dtype change is "
           "differentiable.")
      .def("float", [](const Tensor& x) { return cast(x, DType::f32); }, release_gil())
      .def("double", [](const Tensor& x) { return cast(x, DType::f64); }, release_gil())
      .def("long", [](const Tensor& x) { return cast(x, DType::i64); }, release_gil())
      .def("cpu", [](const Tensor& x) { return x.to(Device::cpu); }, release_gil())
      .def("copy_", [](Tensor& x, const Tensor& src) { copy_(x, src); return x; }, nb::arg("src"), release_gil(),
           "Copies src's values into this tensor (broadcast, any dtype or device).")
      .def("fill_", [](Tensor& x, double v) { x.fill(v); return x; }, nb::arg("value"), release_gil())
      .def("zero_", [](Tensor& x) { x.fill(0); return x; }, release_gil())
      .def("data_ptr", [](const Tensor& x) { return reinterpret_cast<uintptr_t>(x.raw_data()); },
           "Address of the first element (to prove aliasing).");

  m.def("empty", [](nb::args shape, nb::handle dtype, nb::handle device) {
          return Tensor::empty(shape_of_args(shape), dtype_or(dtype, DType::f32), device_or(device));
        }, "shape"_a, "dtype"_a = nb::none(), "device"_a = nb::none(),
        "A tensor of the shape with uninitialised values.");
  m.def("zeros", [](nb::args shape, nb::handle dtype, nb::handle device, bool requires_grad) {
          Tensor t = Tensor::zeros(shape_of_args(shape), dtype_or(dtype, DType::f32), device_or(device));
          t.set_requires_grad(requires_grad);
          return t;
        }, "shape"_a, "dtype"_a = nb::none(), "device"_a = nb::none(), "requires_grad"_a = false);
  m.def("ones", [](nb::args shape, nb::handle dtype, nb::handle device, bool requires_grad) {
          Tensor t = Tensor::ones(shape_of_args(shape), dtype_or(dtype, DType::f32), device_or(device));
          t.set_requires_grad(requires_grad);
          return t;
        }, "shape"_a, "dtype"_a = nb::none(), "device"_a = nb::none(), "requires_grad"_a = false);
  m.def("full", [](nb::handle shape, double value, nb::handle dtype, nb::handle device, bool requires_grad) {
          Tensor t = Tensor::full(to_shape(shape), value, dtype_or(dtype, DType::f32), device_or(device));
          t.set_requires_grad(requires_grad);
          return t;
        }, "shape"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(),
        "requires_grad"_a = false);
  m.def("arange", [](int64_t n, nb::handle dtype) { return Tensor::arange(n, dtype_or(dtype, DType::i64)); },
        "n"_a, nb::kw_only(), "dtype"_a = nb::none(), "0, 1, ..., n-1 (int64 unless dtype says otherwise).");

  m.def("set_num_threads", &set_num_threads, "n"_a,
        "Sizes braid's one intra-op thread pool (OpenMP, shared with oneDNN and OpenBLAS), as train.threads does.");
  m.def("num_threads", &num_threads, "Threads of the intra-op pool.");
  m.def("available_cores", &available_cores, "Cores this process may run on (its CPU affinity).");
  m.def("randn_", [](Tensor& x, Generator& g, double mean, double std) {
          nn::init::normal_(x, mean, std, g);
          return x;
        }, "tensor"_a, "generator"_a, "mean"_a = 0.0, "std"_a = 1.0, release_gil(),
        "Fills the tensor with N(mean, std^2) draws from the generator, in row-major order.");
  m.def("rand_", [](Tensor& x, Generator& g, double lo, double hi) {
          nn::init::uniform_(x, lo, hi, g);
          return x;
        }, "tensor"_a, "generator"_a, "low"_a = 0.0, "high"_a = 1.0, release_gil(),
        "Fills the tensor with U(low, high) draws from the generator, in row-major order.");
}

}  // namespace braid::python
