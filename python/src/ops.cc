// Ops on braid.Tensor: Python's operators, indexing, the op functions of
// braid/ops (as braid.add, braid.matmul, ... and as Tensor methods), and
// autograd: backward, braid.grad, braid.no_grad. Every op runs with the GIL
// released; each is one registry call (or a few) in C++.
#include <mutex>

#include "bindings.h"
#include "braid/nn/loss.h"
#include "braid/ops/ops.h"
#include "braid/ops/tensor_ops.h"

namespace braid::python {

namespace {

Tensor opt(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

// One backward at a time per process: the engine writes leaves' .grad, which
// two Python threads sharing a model would otherwise race on. Taken with the
// GIL released, so a thread waiting here lets the other finish.
std::mutex backward_mu;

// After a backward the graph is let go of, unless retain_graph: a Python
// loop's `loss` lives until the next step reassigns it, and would otherwise
// keep every saved activation of this step alive through the next forward
// (twice the memory the trainer's step needs). As torch does by default.
void release_graph(const Tensor& root) {
  if (root.is_leaf()) return;
  root.grad_meta().grad_fn.reset();
  root.grad_meta().requires_grad = false;
}

void run_backward(const Tensor& root, const Tensor& grad, bool retain_graph) {
  std::lock_guard lock(backward_mu);
  autograd::backward(root, grad);
  if (!retain_graph) release_graph(root);
}

// In-place arithmetic (a += b): the result written into a's memory, which
// every handle and view of `a` sees (a parameter updated under no_grad).
Tensor& assign(Tensor& self, const Tensor& result, const char* op) {
  if (autograd::grad_enabled() && (self.requires_grad() || result.requires_grad()))
    fail<ValueError>("{}: in-place arithmetic on a tensor that requires grad records no history; do it inside "
                     "`with braid.no_grad():` or write `a = a {} b`", op, op[2]);
  if (result.shape() != self.shape())
    fail<ValueError>("{}: the result's shape {} is not the tensor's {}", op, to_string(result.shape()),
                     to_string(self.shape()));
  copy_(self, result);
  return self;
}

std::vector<int64_t> dims_or_all(const nb::handle& dim) { return dim.is_none() ? std::vector<int64_t>{} : to_dims(dim); }

// Python's indexing: ints, slices (step > 0), None, Ellipsis, and a 1-d
// int64 tensor on the first indexed dim (index_select). Every piece is a
// differentiable op, so x[1:, 0] has a gradient.
Tensor index(const Tensor& x, nb::handle key) {
  std::vector<nb::handle> items;
  if (PyTuple_Check(key.ptr())) {
    for (nb::handle h : nb::borrow<nb::tuple>(key)) items.push_back(h);
  } else {
    items.push_back(key);
  }
  int64_t consumed = 0, ellipses = 0;
  for (nb::handle h : items) {
    if (h.is_none()) continue;
    if (h.ptr() == Py_Ellipsis) {
      ++ellipses;
      continue;
    }
    ++consumed;
  }
  if (ellipses > 1) fail<IndexError>("an index can only have a single ellipsis");
  if (consumed > x.ndim()) fail<IndexError>("too many indices ({}) for a tensor of {} dims", consumed, x.ndim());
  Tensor out = x;
  int64_t dim = 0;  // the dim of `out` the next item indexes
  // The GIL stays held: these are views (index_select aside), cheaper than
  // handing the lock back and forth per item.
  for (nb::handle h : items) {
    if (h.is_none()) {
      out = unsqueeze(out, dim++);
    } else if (h.ptr() == Py_Ellipsis) {
      dim += x.ndim() - consumed;
    } else if (PySlice_Check(h.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(h.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      if (step <= 0) fail<ValueError>("slices with step {} are not supported (step must be positive)", step);
      const Py_ssize_t n = PySlice_AdjustIndices(static_cast<Py_ssize_t>(out.size(dim)), &start, &stop, step);
      if (!(start == 0 && step == 1 && n == out.size(dim))) out = slice(out, dim, start, start + n * step, step);
      ++dim;
    } else if (nb::isinstance<Tensor>(h)) {
      const Tensor idx = nb::cast<Tensor>(h);
      if (idx.ndim() != 1 || (idx.dtype() != DType::i64 && idx.dtype() != DType::i32))
        fail<IndexError>("a tensor index must be 1-d int64 (got {} {})", name(idx.dtype()), to_string(idx.shape()));
      out = index_select(out, dim++, idx.dtype() == DType::i64 ? idx : cast(idx, DType::i64));
    } else if (PyIndex_Check(h.ptr())) {
      nb::object number = nb::steal(PyNumber_Index(h.ptr()));
      if (!number.is_valid()) throw nb::python_error();
      int64_t i = nb::cast<int64_t>(number);
      const int64_t n = out.size(dim);
      if (i < -n || i >= n) fail<IndexError>("index {} is out of range for dim {} of size {}", i, dim, n);
      if (i < 0) i += n;
      out = squeeze(slice(out, dim, i, i + 1), dim);
    } else {
      fail<IndexError>("tensors are indexed by ints, slices, None, ... or 1-d int64 tensors, not {}",
                       nb::cast<std::string>(nb::str(h.type().attr("__name__"))));
    }
  }
  return out;
}

void set_index(Tensor& x, nb::handle key, nb::handle value) {
  if (autograd::grad_enabled() && x.requires_grad())
    fail<ValueError>("assigning into a tensor that requires grad records no history; do it inside "
                     "`with braid.no_grad():`");
  autograd::NoGradGuard no_grad;
  Tensor view = index(x, key);
  if (nb::isinstance<Tensor>(value)) {
    const Tensor v = nb::cast<Tensor>(value);
    copy_(view, v.shape() == view.shape() ? v : expand(v, view.shape()));
  } else {
    view.fill(nb::cast<double>(value));
  }
}

// Gradients of `outputs` with respect to leaf `inputs`, returned without
// touching the leaves' .grad (saved and put back around the backward).
std::vector<std::optional<Tensor>> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                        const std::optional<std::vector<Tensor>>& grad_outputs, bool retain_graph) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_leaf() || !inputs[i].requires_grad())
      fail<ValueError>("grad: input {} must be a leaf that requires grad (braid's engine accumulates into leaves)", i);
  }
  if (grad_outputs && grad_outputs->size() != outputs.size())
    fail<ValueError>("grad: {} grad_outputs for {} outputs", grad_outputs->size(), outputs.size());
  std::lock_guard lock(backward_mu);
  std::vector<std::shared_ptr<Tensor>> saved;
  std::vector<bool> saved_zero;
  for (const Tensor& in : inputs) {
    saved.push_back(in.grad_meta().grad);
    saved_zero.push_back(in.grad_meta().grad_is_zero);
    in.grad_meta().grad.reset();
  }
  std::vector<std::optional<Tensor>> out;
  try {
    for (size_t i = 0; i < outputs.size(); ++i)
      autograd::backward(outputs[i], grad_outputs ? (*grad_outputs)[i] : Tensor());
    for (const Tensor& in : inputs) {
      Tensor g = in.grad();
      out.push_back(g.defined() ? std::optional<Tensor>(g) : std::nullopt);
    }
  } catch (...) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      inputs[i].grad_meta().grad = saved[i];
      inputs[i].grad_meta().grad_is_zero = saved_zero[i];
    }
    throw;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    inputs[i].grad_meta().grad = saved[i];
    inputs[i].grad_meta().grad_is_zero = saved_zero[i];
  }
  if (!retain_graph)
    for (const Tensor& o : outputs) release_graph(o);
  return out;
}

// `with braid.no_grad():` — NoGradGuard for the block, on the thread that
// entered it (recording is per thread).
class NoGrad {
 public:
  NoGrad() = default;
  NoGrad(const NoGrad&) = delete;
  NoGrad& operator=(const NoGrad&) = delete;
  void enter() { guards_.push_back(std::make_unique<autograd::NoGradGuard>()); }
  void exit(nb::args) {
    if (!guards_.empty()) guards_.pop_back();
  }

 private:
  std::vector<std::unique_ptr<autograd::NoGradGuard>> guards_;
};

std::array<int64_t, 2> pair_of(nb::handle h, const char* what) {
  if (PyLong_Check(h.ptr())) {
    const int64_t v = nb::cast<int64_t>(h);
    return {v, v};
  }
  const Shape s = to_shape(h);
  if (s.size() != 2) fail<ValueError>("{} takes an int or a pair of ints, got {} values", what, s.size());
  return {s[0], s[1]};
}

GeluApproximation gelu_mode(const std::string& a) {
  if (a == "none") return GeluApproximation::none;
  if (a == "tanh") return GeluApproximation::tanh;
  fail<ValueError>("gelu: approximate is 'none' or 'tanh', not '{}'", a);
}

}  // namespace

void bind_ops(nb::module_& m, TensorClass& t) {
  using TT = const Tensor&;
  // Operators. nb::is_operator: an unsupported operand gives NotImplemented,
  // so Python tries the other side (2.0 * t) and names both types when neither works.
  t.def("__add__", [](TT a, TT b) { return add(a, b); }, nb::is_operator(), release_gil())
      .def("__add__", [](TT a, double b) { return add(a, b); }, nb::is_operator(), release_gil())
      .def("__radd__", [](TT a, double b) { return add(a, b); }, nb::is_operator(), release_gil())
      .def("__sub__", [](TT a, TT b) { return sub(a, b); }, nb::is_operator(), release_gil())
      .def("__sub__", [](TT a, double b) { return sub(a, b); }, nb::is_operator(), release_gil())
      .def("__rsub__", [](TT a, double b) { return sub(b, a); }, nb::is_operator(), release_gil())
      .def("__mul__", [](TT a, TT b) { return mul(a, b); }, nb::is_operator(), release_gil())
      .def("__mul__", [](TT a, double b) { return mul(a, b); }, nb::is_operator(), release_gil())
      .def("__rmul__", [](TT a, double b) { return mul(a, b); }, nb::is_operator(), release_gil())
      .def("__truediv__", [](TT a, TT b) { return div(a, b); }, nb::is_operator(), release_gil())
      .def("__truediv__", [](TT a, double b) { return div(a, b); }, nb::is_operator(), release_gil())
      .def("__rtruediv__", [](TT a, double b) { return div(b, a); }, nb::is_operator(), release_gil())
      .def("__matmul__", [](TT a, TT b) { return matmul(a, b); }, nb::is_operator(), release_gil())
      .def("__pow__", [](TT a, double e) { return pow(a, e); }, nb::is_operator(), release_gil())
      .def("__neg__", [](TT a) { return neg(a); }, release_gil())
      .def("__abs__", [](TT a) { return abs(a); }, release_gil())
      .def("__eq__", [](TT a, TT b) { return eq(a, b); }, nb::is_operator(), release_gil())
      .def("__eq__", [](TT a, double b) { return eq(a, b); }, nb::is_operator(), release_gil())
      .def("__ne__", [](TT a, TT b) { return ne(a, b); }, nb::is_operator(), release_gil())
      .def("__ne__", [](TT a, double b) { return ne(a, b); }, nb::is_operator(), release_gil())
      .def("__lt__", [](TT a, TT b) { return lt(a, b); }, nb::is_operator(), release_gil())
      .def("__lt__", [](TT a, double b) { return lt(a, b); }, nb::is_operator(), release_gil())
      .def("__le__", [](TT a, TT b) { return le(a, b); }, nb::is_operator(), release_gil())
      .def("__le__", [](TT a, double b) { return le(a, b); }, nb::is_operator(), release_gil())
      .def("__gt__", [](TT a, TT b) { return gt(a, b); }, nb::is_operator(), release_gil())
      .def("__gt__", [](TT a, double b) { return gt(a, b); }, nb::is_operator(), release_gil())
      .def("__ge__", [](TT a, TT b) { return ge(a, b); }, nb::is_operator(), release_gil())
      .def("__ge__", [](TT a, double b) { return ge(a, b); }, nb::is_operator(), release_gil())
      .def("__iadd__", [](Tensor& a, TT b) -> Tensor& { return assign(a, add(a, b), "a += b"); }, nb::is_operator(),
           nb::rv_policy::none, release_gil())
      .def("__iadd__", [](Tensor& a, double b) -> Tensor& { return assign(a, add(a, b), "a += b"); },
           nb::is_operator(), nb::rv_policy::none, release_gil())
      .def("__isub__", [](Tensor& a, TT b) -> Tensor& { return assign(a, sub(a, b), "a -= b"); }, nb::is_operator(),
           nb::rv_policy::none, release_gil())
      .def("__isub__", [](Tensor& a, double b) -> Tensor& { return assign(a, sub(a, b), "a -= b"); },
           nb::is_operator(), nb::rv_policy::none, release_gil())
      .def("__imul__", [](Tensor& a, TT b) -> Tensor& { return assign(a, mul(a, b), "a *= b"); }, nb::is_operator(),
           nb::rv_policy::none, release_gil())
      .def("__imul__", [](Tensor& a, double b) -> Tensor& { return assign(a, mul(a, b), "a *= b"); },
           nb::is_operator(), nb::rv_policy::none, release_gil())
      .def("__itruediv__", [](Tensor& a, TT b) -> Tensor& { return assign(a, div(a, b), "a /= b"); },
           nb::is_operator(), nb::rv_policy::none, release_gil())
      .def("__itruediv__", [](Tensor& a, double b) -> Tensor& { return assign(a, div(a, b), "a /= b"); },
           nb::is_operator(), nb::rv_policy::none, release_gil())
      .def("__getitem__", &index, "key"_a)
      .def("__setitem__", &set_index, "key"_a, "value"_a);

  // Methods that mirror the functions below.
  t.def("sum", [](TT x, nb::handle dim, bool keepdim) {
         std::vector<int64_t> d = dims_or_all(dim);
         nb::gil_scoped_release r;
         return d.empty() && !keepdim ? sum(x) : sum(x, d, keepdim);
       }, "dim"_a = nb::none(), "keepdim"_a = false)
      .def("mean", [](TT x, nb::handle dim, bool keepdim) {
         std::vector<int64_t> d = dims_or_all(dim);
         nb::gil_scoped_release r;
         return d.empty() && !keepdim ? mean(x) : mean(x, d, keepdim);
       }, "dim"_a = nb::none(), "keepdim"_a = false)
      .def("var", [](TT x, nb::handle dim, bool unbiased, bool keepdim) {
         std::vector<int64_t> d = dims_or_all(dim);
         nb::gil_scoped_release r;
         return var(x, d, unbiased, keepdim);
       }, "dim"_a = nb::none(), "unbiased"_a = true, "keepdim"_a = false)
      .def("max", [](TT x, std::optional<int64_t> dim, bool keepdim) -> nb::object {
         if (!dim) {
           nb::gil_scoped_release r;
           Tensor v = max(x);
           nb::gil_scoped_acquire g;
           return nb::cast(v);
         }
         MaxResult res;
         {
           nb::gil_scoped_release r;
           res = max(x, *dim, keepdim);
         }
         return nb::make_tuple(res.values, res.indices);
       }, "dim"_a = nb::none(), "keepdim"_a = false)
      .def("argmax", [](TT x, std::optional<int64_t> dim, bool keepdim) {
         return dim ? argmax(x, *dim, keepdim) : argmax(x);
       }, "dim"_a = nb::none(), "keepdim"_a = false, release_gil())
      .def("reshape", [](TT x, nb::args shape) {
         Shape s = shape.size() == 1 && !PyLong_Check(shape[0].ptr()) ? to_shape(shape[0]) : to_shape(shape);
         nb::gil_scoped_release r;
         return reshape(x, s);
       }, "shape"_a)
      .def("view", [](TT x, nb::args shape) {
         Shape s = shape.size() == 1 && !PyLong_Check(shape[0].ptr()) ? to_shape(shape[0]) : to_shape(shape);
         nb::gil_scoped_release r;
         return reshape(x, s);
       }, "shape"_a)
      .def("flatten", [](TT x, int64_t s, int64_t e) { return flatten(x, s, e); }, "start_dim"_a = 0,
           "end_dim"_a = -1, release_gil())
      .def("transpose", [](TT x, int64_t a, int64_t b) { return transpose(x, a, b); }, "dim0"_a, "dim1"_a,
           release_gil())
      .def_prop_ro("T", [](TT x) {
        if (x.ndim() != 2) fail<ValueError>(".T is the transpose of a 2-d tensor; this one has {} dims", x.ndim());
        return transpose(x, 0, 1);
      })
      .def("permute", [](TT x, nb::args dims) {
         std::vector<int64_t> d = dims.size() == 1 && !PyLong_Check(dims[0].ptr()) ? to_dims(dims[0]) : to_dims(dims);
         nb::gil_scoped_release r;
         return permute(x, d);
       }, "dims"_a)
      .def("expand", [](TT x, nb::args shape) {
         Shape s = shape.size() == 1 && !PyLong_Check(shape[0].ptr()) ? to_shape(shape[0]) : to_shape(shape);
         nb::gil_scoped_release r;
         return expand(x, s);
       }, "shape"_a)
      .def("squeeze", [](TT x, std::optional<int64_t> dim) { return dim ? squeeze(x, *dim) : squeeze(x); },
           "dim"_a = nb::none(), release_gil())
      .def("unsqueeze", [](TT x, int64_t dim) { return unsqueeze(x, dim); }, "dim"_a, release_gil())
      .def("exp", [](TT x) { return exp(x); }, release_gil())
      .def("log", [](TT x) { return log(x); }, release_gil())
      .def("sqrt", [](TT x) { return sqrt(x); }, release_gil())
      .def("abs", [](TT x) { return abs(x); }, release_gil())
      .def("relu", [](TT x) { return relu(x); }, release_gil())
      .def("tanh", [](TT x) { return tanh(x); }, release_gil())
      .def("sigmoid", [](TT x) { return sigmoid(x); }, release_gil())
      .def("pow", [](TT x, double e) { return pow(x, e); }, "exponent"_a, release_gil())
      .def("softmax", [](TT x, int64_t dim) { return softmax(x, dim); }, "dim"_a, release_gil())
      .def("log_softmax", [](TT x, int64_t dim) { return log_softmax(x, dim); }, "dim"_a, release_gil())
      .def("matmul", [](TT a, TT b) { return matmul(a, b); }, "other"_a, release_gil())
      .def("clamp", [](TT x, std::optional<double> lo, std::optional<double> hi) { return clamp(x, lo, hi); },
           "min"_a = nb::none(), "max"_a = nb::none(), release_gil())
      .def("masked_fill", [](TT x, TT mask, double v) { return masked_fill(x, mask, v); }, "mask"_a, "value"_a,
           release_gil())
      .def("add_", [](Tensor& a, TT b) -> Tensor& { return assign(a, add(a, b), "a += b"); }, "other"_a,
           nb::rv_policy::none, release_gil())
      .def("mul_", [](Tensor& a, double b) -> Tensor& { return assign(a, mul(a, b), "a *= b"); }, "value"_a,
           nb::rv_policy::none, release_gil())
      .def("backward", [](TT x, std::optional<Tensor> gradient, bool retain_graph) {
             run_backward(x, opt(gradient), retain_graph);
           }, "gradient"_a = nb::none(), "retain_graph"_a = false, release_gil(),
           "Accumulates d(self)/d(leaf) into every leaf's .grad (gradient defaults to 1 for a one-element "
           "tensor). The graph behind this tensor is let go of afterwards (as torch does), unless retain_graph: "
           "a second backward through it needs retain_graph=True on the first.");

  // Functions (braid.add, ...). Scalars are Python floats or ints.
  m.def("add", [](TT a, TT b) { return add(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("add", [](TT a, double b) { return add(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("sub", [](TT a, TT b) { return sub(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("sub", [](TT a, double b) { return sub(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("mul", [](TT a, TT b) { return mul(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("mul", [](TT a, double b) { return mul(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("div", [](TT a, TT b) { return div(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("div", [](TT a, double b) { return div(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("neg", [](TT x) { return neg(x); }, "x"_a, release_gil());
  m.def("exp", [](TT x) { return exp(x); }, "x"_a, release_gil());
  m.def("log", [](TT x) { return log(x); }, "x"_a, release_gil());
  m.def("sqrt", [](TT x) { return sqrt(x); }, "x"_a, release_gil());
  m.def("abs", [](TT x) { return abs(x); }, "x"_a, release_gil());
  m.def("sign", [](TT x) { return sign(x); }, "x"_a, release_gil());
  m.def("pow", [](TT x, double e) { return pow(x, e); }, "x"_a, "exponent"_a, release_gil());
  m.def("maximum", [](TT a, TT b) { return maximum(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("minimum", [](TT a, TT b) { return minimum(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("eq", [](TT a, TT b) { return eq(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("lt", [](TT a, TT b) { return lt(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("gt", [](TT a, TT b) { return gt(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("relu", [](TT x) { return relu(x); }, "x"_a, release_gil());
  m.def("gelu", [](TT x, const std::string& a) {
          const GeluApproximation mode = gelu_mode(a);
          nb::gil_scoped_release r;
          return gelu(x, mode);
        }, "x"_a, "approximate"_a = "none");
  m.def("tanh", [](TT x) { return tanh(x); }, "x"_a, release_gil());
  m.def("sigmoid", [](TT x) { return sigmoid(x); }, "x"_a, release_gil());
  m.def("clamp", [](TT x, std::optional<double> lo, std::optional<double> hi) { return clamp(x, lo, hi); }, "x"_a,
        "min"_a = nb::none(), "max"_a = nb::none(), release_gil());
  m.def("where", [](TT c, TT a, TT b) { return where(c, a, b); }, "condition"_a, "a"_a, "b"_a, release_gil());
  m.def("masked_fill", [](TT x, TT mask, double v) { return masked_fill(x, mask, v); }, "x"_a, "mask"_a, "value"_a,
        release_gil());
  m.def("softmax", [](TT x, int64_t dim) { return softmax(x, dim); }, "x"_a, "dim"_a, release_gil());
  m.def("log_softmax", [](TT x, int64_t dim) { return log_softmax(x, dim); }, "x"_a, "dim"_a, release_gil());
  m.def("matmul", [](TT a, TT b) { return matmul(a, b); }, "a"_a, "b"_a, release_gil());
  m.def("linear", [](TT x, TT w, std::optional<Tensor> b) { return linear(x, w, opt(b)); }, "x"_a, "weight"_a,
        "bias"_a = nb::none(), release_gil(), "x @ weight.T + bias; weight [out, in].");
  m.def("cat", [](const std::vector<Tensor>& xs, int64_t dim) { return concat(xs, dim); }, "tensors"_a,
        "dim"_a = 0, release_gil());
  m.def("stack", [](const std::vector<Tensor>& xs, int64_t dim) { return stack(xs, dim); }, "tensors"_a,
        "dim"_a = 0, release_gil());
  m.def("split", [](TT x, nb::handle size, int64_t dim) {
          if (PyLong_Check(size.ptr())) {
            const int64_t s = nb::cast<int64_t>(size);
            nb::gil_scoped_release r;
            return split(x, s, dim);
          }
          const std::vector<int64_t> sizes = to_dims(size);
          nb::gil_scoped_release r;
          return split(x, sizes, dim);
        }, "x"_a, "split_size_or_sections"_a, "dim"_a = 0);
  m.def("slice", [](TT x, int64_t dim, int64_t start, int64_t end, int64_t step) {
          return slice(x, dim, start, end, step);
        }, "x"_a, "dim"_a, "start"_a, "end"_a, "step"_a = 1, release_gil());
  m.def("embedding", [](TT w, TT idx) { return embedding(w, idx); }, "weight"_a, "indices"_a, release_gil());
  m.def("index_select", [](TT x, int64_t dim, TT idx) { return index_select(x, dim, idx); }, "x"_a, "dim"_a,
        "index"_a, release_gil());
  m.def("gather", [](TT x, int64_t dim, TT idx) { return gather(x, dim, idx); }, "x"_a, "dim"_a, "index"_a,
        release_gil());
  m.def("layer_norm", [](TT x, nb::handle shape, std::optional<Tensor> w, std::optional<Tensor> b, double eps) {
          const Shape s = to_shape(shape);
          nb::gil_scoped_release r;
          return layer_norm(x, s, opt(w), opt(b), eps);
        }, "x"_a, "normalized_shape"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5);
  m.def("batch_norm", [](TT x, TT mean, TT var, std::optional<Tensor> w, std::optional<Tensor> b, bool training,
                         double momentum, double eps) {
          return batch_norm(x, mean, var, opt(w), opt(b), {.training = training, .momentum = momentum, .eps = eps});
        }, "x"_a, "running_mean"_a, "running_var"_a, "weight"_a = nb::none(), "bias"_a = nb::none(),
        "training"_a = true, "momentum"_a = 0.1, "eps"_a = 1e-5, release_gil());
  m.def("dropout", [](TT x, double p, bool training, Generator* gen) {
          return dropout(x, {.p = p, .training = training, .generator = gen});
        }, "x"_a, "p"_a = 0.5, "training"_a = true, "generator"_a = nb::none(), release_gil());
  m.def("conv2d", [](TT x, TT w, std::optional<Tensor> b, nb::handle stride, nb::handle padding, nb::handle dilation,
                     int64_t groups) {
          Conv2dOptions o{.stride = pair_of(stride, "stride"), .padding = pair_of(padding, "padding"),
                          .dilation = pair_of(dilation, "dilation"), .groups = groups};
          nb::gil_scoped_release r;
          return conv2d(x, w, opt(b), o);
        }, "x"_a, "weight"_a, "bias"_a = nb::none(), "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
        "groups"_a = 1);
  auto pool = [](auto fn) {
    return [fn](TT x, nb::handle kernel, nb::handle stride, nb::handle padding) {
      Pool2dOptions o{.kernel = pair_of(kernel, "kernel_size"),
                      .stride = stride.is_none() ? std::array<int64_t, 2>{0, 0} : pair_of(stride, "stride"),
                      .padding = pair_of(padding, "padding")};
      nb::gil_scoped_release r;
      return fn(x, o);
    };
  };
  m.def("max_pool2d", pool([](TT x, const Pool2dOptions& o) { return max_pool2d(x, o); }), "x"_a, "kernel_size"_a,
        "stride"_a = nb::none(), "padding"_a = 0);
  m.def("avg_pool2d", pool([](TT x, const Pool2dOptions& o) { return avg_pool2d(x, o); }), "x"_a, "kernel_size"_a,
        "stride"_a = nb::none(), "padding"_a = 0);
  // The losses as the trainer applies them (nn/loss.h): classification
  // takes logits [..., C] with targets [...] (a language model's [B, T, V]).
  m.def("cross_entropy", [](TT logits, TT targets) { return nn::cross_entropy_loss(logits, targets); }, "logits"_a,
        "targets"_a, release_gil(), "Mean cross-entropy of logits [..., C] against int64 class targets [...].");
  m.def("nll_loss", [](TT lp, TT targets) { return nn::nll_loss(lp, targets); }, "log_probs"_a, "targets"_a,
        release_gil(), "Mean negative log-likelihood of log-probabilities [..., C] at int64 targets [...].");
  m.def("mse_loss", [](TT x, TT y) { return nn::mse_loss(x, y); }, "input"_a, "target"_a, release_gil());
  m.def("bce_with_logits", [](TT x, TT y) { return nn::bce_with_logits_loss(x, y); }, "logits"_a, "targets"_a,
        release_gil());
  m.def("cast", [](TT x, DType d) { return cast(x, d); }, "x"_a, "dtype"_a, release_gil());

  m.def("grad", &grad, "outputs"_a, "inputs"_a, "grad_outputs"_a = nb::none(), "retain_graph"_a = false,
        release_gil(),
        "Gradients of the outputs with respect to leaf inputs, as a list (None where an input got none); the "
        "inputs' .grad are left as they were.");
  m.def("is_grad_enabled", &autograd::grad_enabled, "Whether ops record autograd history on this thread.");
  nb::class_<NoGrad>(m, "no_grad",
                     "Context manager: ops inside record no autograd history (on this thread), as torch.no_grad.")
      .def(nb::init<>())
      .def("__enter__", &NoGrad::enter)
      .def("__exit__", &NoGrad::exit);
}

}  // namespace braid::python
