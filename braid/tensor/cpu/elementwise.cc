#include "braid/tensor/cpu/elementwise.h"

#include <cmath>

#include "braid/tensor/cpu/loops.h"
#include "braid/tensor/cpu/vmath.h"

namespace braid::cpu {

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kInvSqrt2 = 0.70710678118654752440;     // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

// out[i] = f(x[i]); `out` is a fresh contiguous tensor of x's shape.
// Contiguous operands: split the flat range over the pool. (strided_loop
// merges a contiguous tensor into one row and would run it on one thread.)
template <class Body>
void flat_parallel(int64_t n, Body body) {
  parallel_for(0, n, kParallelGrain, [&](int64_t lo, int64_t hi) { body(lo, hi); });
}

template <class In, class Out, class F>
void map1(const Tensor& x, const Tensor& out, F f) {
  Out* op = static_cast<Out*>(out.raw_data());
  if (x.is_contiguous()) {
    const In* a = static_cast<const In*>(x.raw_data());
    flat_parallel(x.numel(), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) op[i] = f(a[i]);
    });
    return;
  }
  const In* xp = static_cast<const In*>(x.storage()->data());
  strided_loop<2>(x.shape(), {out.strides(), x.strides()}, {0, x.offset()},
                  [&](std::array<int64_t, 2> off, int64_t n, std::array<int64_t, 2> st) {
                    Out* o = op + off[0];
                    const In* a = xp + off[1];
                    if (st[0] == 1 && st[1] == 1) {
                      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(a[i * st[1]]);
                    }
                  });
}

// out[i] = f(a[i], b[i]) over the broadcast shape of `out`; the scalar-operand
// paths keep bias-style broadcasting vectorised.
template <class In, class Out, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  Out* op = static_cast<Out*>(out.raw_data());
  const bool a_flat = a.shape() == out.shape() && a.is_contiguous();
  const bool b_flat = b.shape() == out.shape() && b.is_contiguous();
  if (a_flat && (b_flat || b.numel() == 1)) {
    const In* x = static_cast<const In*>(a.raw_data());
    const In* y = static_cast<const In*>(b.raw_data());
    if (b_flat) {
      flat_parallel(out.numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) op[i] = f(x[i], y[i]);
      });
    } else {
      const In yv = *y;
      flat_parallel(out.numel(), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) op[i] = f(x[i], yv);
      });
    }
    return;
  }
  const In* ap = static_cast<const In*>(a.storage()->data());
  const In* bp = static_cast<const In*>(b.storage()->data());
  strided_loop<3>(out.shape(), {out.strides(), broadcast_strides(a, out.shape()), broadcast_strides(b, out.shape())},
                  {0, a.offset(), b.offset()},
                  [&](std::array<int64_t, 3> off, int64_t n, std::array<int64_t, 3> st) {
                    Out* o = op + off[0];
                    const In* x = ap + off[1];
                    const In* y = bp + off[2];
                    if (st[0] == 1 && st[1] == 1 && st[2] == 1) {
                      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
                    } else if (st[0] == 1 && st[1] == 1 && st[2] == 0) {
                      const In yv = *y;
                      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
                    } else if (st[0] == 1 && st[1] == 0 && st[2] == 1) {
                      const In xv = *x;
                      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
                    } else {
                      for (int64_t i = 0; i < n; ++i) o[i * st[0]] = f(x[i * st[1]], y[i * st[2]]);
                    }
                  });
}

[[noreturn]] void bad_dtype(const char* name, const Tensor& x) {
  fail<ValueError>("{}: dtype {} is not supported (input of shape {})", name, braid::name(x.dtype()),
                   to_string(x.shape()));
}

// Calls fn(T{}) for f32/f64, and for i32/i64 when `ints`.
template <class Fn>
void dispatch(const Tensor& x, const char* name, bool ints, Fn&& fn) {
  switch (x.dtype()) {
    case DType::f32: return fn(float{});
    case DType::f64: return fn(double{});
    case DType::i32: if (ints) return fn(int32_t{}); break;
    case DType::i64: if (ints) return fn(int64_t{}); break;
    default: break;
  }
  bad_dtype(name, x);
}

bool unary_accepts_ints(Unary op) {
  switch (op) {
    case Unary::neg: case Unary::abs: case Unary::sign: case Unary::relu: case Unary::clamp:
    case Unary::add: case Unary::mul: case Unary::rsub:
      return true;
    default:
      return false;
  }
}

template <class T>
void unary_typed(Unary op, const Tensor& x, const Tensor& out, double alpha, double beta) {
  const T a = static_cast<T>(alpha);
  switch (op) {
    case Unary::neg: return map1<T, T>(x, out, [](T v) { return static_cast<T>(-v); });
    case Unary::abs: return map1<T, T>(x, out, [](T v) { return v < 0 ? static_cast<T>(-v) : v; });
    case Unary::sign: return map1<T, T>(x, out, [](T v) { return static_cast<T>((v > 0) - (v < 0)); });
    case Unary::relu: return map1<T, T>(x, out, [](T v) { return v > 0 || v != v ? v : T{0}; });
    case Unary::clamp:
      return map1<T, T>(x, out, [lo = alpha, hi = beta](T v) {
        const double d = static_cast<double>(v);
        return d != d ? v : static_cast<T>(d < lo ? lo : (d > hi ? hi : d));
      });
    case Unary::add: return map1<T, T>(x, out, [a](T v) { return static_cast<T>(v + a); });
    case Unary::mul: return map1<T, T>(x, out, [a](T v) { return static_cast<T>(v * a); });
    case Unary::rsub: return map1<T, T>(x, out, [a](T v) { return static_cast<T>(a - v); });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case Unary::exp: return map1<T, T>(x, out, [](T v) { return std::exp(v); });
      case Unary::log: return map1<T, T>(x, out, [](T v) { return std::log(v); });
      case Unary::sqrt: return map1<T, T>(x, out, [](T v) { return std::sqrt(v); });
      case Unary::sigmoid: return map1<T, T>(x, out, [](T v) { return T{1} / (T{1} + std::exp(-v)); });
      case Unary::tanh: return map1<T, T>(x, out, [](T v) { return std::tanh(v); });
      case Unary::gelu_tanh:
        return map1<T, T>(x, out, [](T v) {
          const T inner = static_cast<T>(kSqrt2OverPi) * (v + static_cast<T>(kGeluCubic) * v * v * v);
          return static_cast<T>(0.5) * v * (T{1} + std::tanh(inner));
        });
      case Unary::gelu_erf:
        return map1<T, T>(x, out, [](T v) {
          return static_cast<T>(0.5) * v * (T{1} + std::erf(v * static_cast<T>(kInvSqrt2)));
        });
      case Unary::pow:
        if (alpha == 2) return map1<T, T>(x, out, [](T v) { return v * v; });
        return map1<T, T>(x, out, [a](T v) { return std::pow(v, a); });
      case Unary::pow_grad:
        if (alpha == 2) return map1<T, T>(x, out, [](T v) { return 2 * v; });
        return map1<T, T>(x, out, [a](T v) { return a * std::pow(v, a - 1); });
      case Unary::rdiv: return map1<T, T>(x, out, [a](T v) { return a / v; });
      default: break;
    }
  }
  bad_dtype("unary", x);
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  return false;
}

template <class T>
void compare_typed(Binary op, const Tensor& a, const Tensor& b, const Tensor& out) {
  switch (op) {
    case Binary::eq: return map2<T, bool>(a, b, out, [](T x, T y) { return x == y; });
    case Binary::ne: return map2<T, bool>(a, b, out, [](T x, T y) { return x != y; });
    case Binary::lt: return map2<T, bool>(a, b, out, [](T x, T y) { return x < y; });
    case Binary::le: return map2<T, bool>(a, b, out, [](T x, T y) { return x <= y; });
    case Binary::gt: return map2<T, bool>(a, b, out, [](T x, T y) { return x > y; });
    case Binary::ge: return map2<T, bool>(a, b, out, [](T x, T y) { return x >= y; });
    default: break;
  }
}

template <class T>
void arith_typed(Binary op, const Tensor& a, const Tensor& b, const Tensor& out, const char* name) {
  switch (op) {
    case Binary::add: return map2<T, T>(a, b, out, [](T x, T y) { return static_cast<T>(x + y); });
    case Binary::sub: return map2<T, T>(a, b, out, [](T x, T y) { return static_cast<T>(x - y); });
    case Binary::mul: return map2<T, T>(a, b, out, [](T x, T y) { return static_cast<T>(x * y); });
    // NaN propagates, as in torch.maximum / torch.minimum.
    case Binary::maximum:
      return map2<T, T>(a, b, out, [](T x, T y) { return x > y || is_nan(x) ? x : y; });
    case Binary::minimum:
      return map2<T, T>(a, b, out, [](T x, T y) { return x < y || is_nan(x) ? x : y; });
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case Binary::div: return map2<T, T>(a, b, out, [](T x, T y) { return x / y; });
      case Binary::relu_grad: return map2<T, T>(a, b, out, [](T g, T x) { return x > 0 ? g : T{0}; });
      case Binary::sigmoid_grad: return map2<T, T>(a, b, out, [](T g, T y) { return g * y * (T{1} - y); });
      case Binary::tanh_grad: return map2<T, T>(a, b, out, [](T g, T y) { return g * (T{1} - y * y); });
      case Binary::gelu_tanh_grad:
        return map2<T, T>(a, b, out, [](T g, T x) {
          const T k = static_cast<T>(kSqrt2OverPi), c = static_cast<T>(kGeluCubic);
          const T t = std::tanh(k * (x + c * x * x * x));
          const T dinner = k * (T{1} + 3 * c * x * x);
          return g * (static_cast<T>(0.5) * (T{1} + t) + static_cast<T>(0.5) * x * (T{1} - t * t) * dinner);
        });
      case Binary::gelu_erf_grad:
        return map2<T, T>(a, b, out, [](T g, T x) {
          const T cdf = static_cast<T>(0.5) * (T{1} + std::erf(x * static_cast<T>(kInvSqrt2)));
          const T pdf = static_cast<T>(kInvSqrt2Pi) * std::exp(static_cast<T>(-0.5) * x * x);
          return g * (cdf + x * pdf);
        });
      default: break;
    }
  }
  bad_dtype(name, a);
}

bool is_comparison(Binary op) {
  return op == Binary::eq || op == Binary::ne || op == Binary::lt || op == Binary::le || op == Binary::gt ||
         op == Binary::ge;
}

}  // namespace

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const size_t nd = shape.size(), td = t.shape().size();
  Shape st(nd, 0);
  for (size_t i = 0; i < td; ++i) {
    const size_t d = nd - td + i;
    st[d] = t.shape()[i] == 1 && shape[d] != 1 ? 0 : t.strides()[i];
  }
  return st;
}

Tensor unary(Unary op, const Tensor& x, const char* name, double alpha, double beta) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  // f32 exp/tanh/sigmoid: the vectorised array kernels, split over the pool.
  if (x.dtype() == DType::f32 &&
      (op == Unary::exp || op == Unary::tanh || op == Unary::sigmoid || op == Unary::gelu_tanh ||
       op == Unary::gelu_erf)) {
    const Tensor xc = x.contiguous();
    const float* xp = xc.data<float>();
    float* op_ = out.data<float>();
    auto kernel = op == Unary::exp       ? exp_f32
                  : op == Unary::tanh    ? tanh_f32
                  : op == Unary::sigmoid ? sigmoid_f32
                  : op == Unary::gelu_tanh ? gelu_tanh_f32
                                           : gelu_erf_f32;
    parallel_for(0, x.numel(), kParallelGrain, [&](int64_t lo, int64_t hi) { kernel(xp + lo, op_ + lo, hi - lo); });
    return out;
  }
  dispatch(x, name, unary_accepts_ints(op), [&](auto zero) {
    unary_typed<decltype(zero)>(op, x, out, alpha, beta);
  });
  return out;
}

Tensor binary(Binary op, const Tensor& a, const Tensor& b, const char* name) {
  if (a.dtype() != b.dtype()) {
    fail<ValueError>("{}: dtype mismatch, {} {} and {} {}", name, braid::name(a.dtype()), to_string(a.shape()),
                     braid::name(b.dtype()), to_string(b.shape()));
  }
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  if ((op == Binary::gelu_tanh_grad || op == Binary::gelu_erf_grad) && a.dtype() == DType::f32 &&
      a.shape() == b.shape()) {
    auto kernel = op == Binary::gelu_tanh_grad ? gelu_tanh_grad_f32 : gelu_erf_grad_f32;
    const Tensor gc = a.contiguous(), xc = b.contiguous();
    Tensor out = Tensor::empty(shape, DType::f32);
    const float* gp = gc.data<float>();
    const float* xp = xc.data<float>();
    float* op_ = out.data<float>();
    parallel_for(0, out.numel(), kParallelGrain,
                 [&](int64_t lo, int64_t hi) { kernel(gp + lo, xp + lo, op_ + lo, hi - lo); });
    return out;
  }
  if (is_comparison(op)) {
    Tensor out = Tensor::empty(shape, DType::b8);
    if (a.dtype() == DType::u8) {
      compare_typed<uint8_t>(op, a, b, out);
    } else if (a.dtype() == DType::b8) {
      compare_typed<bool>(op, a, b, out);
    } else {
      dispatch(a, name, true, [&](auto zero) { compare_typed<decltype(zero)>(op, a, b, out); });
    }
    return out;
  }
  Tensor out = Tensor::empty(shape, a.dtype());
  dispatch(a, name, true, [&](auto zero) { arith_typed<decltype(zero)>(op, a, b, out, name); });
  return out;
}

Tensor clamp_grad(const Tensor& g, const Tensor& x, double lo, double hi) {
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch(x, "clamp", false, [&](auto zero) {
    using T = decltype(zero);
    map2<T, T>(g, x, out, [lo, hi](T gv, T xv) {
      const double d = static_cast<double>(xv);
      return d >= lo && d <= hi ? gv : T{0};
    });
  });
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b, const char* name) {
  if (cond.dtype() != DType::b8) {
    fail<ValueError>("{}: condition must be bool, got {} {}", name, braid::name(cond.dtype()), to_string(cond.shape()));
  }
  if (a.dtype() != b.dtype()) {
    fail<ValueError>("{}: dtype mismatch, {} {} and {} {}", name, braid::name(a.dtype()), to_string(a.shape()),
                     braid::name(b.dtype()), to_string(b.shape()));
  }
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), name), b.shape(), name);
  Tensor out = Tensor::empty(shape, a.dtype());
  visit_dtype(a.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const bool* cp = static_cast<const bool*>(cond.storage()->data());
    const T* ap = static_cast<const T*>(a.storage()->data());
    const T* bp = static_cast<const T*>(b.storage()->data());
    T* op = static_cast<T*>(out.raw_data());
    strided_loop<4>(shape,
                    {out.strides(), broadcast_strides(cond, shape), broadcast_strides(a, shape),
                     broadcast_strides(b, shape)},
                    {0, cond.offset(), a.offset(), b.offset()},
                    [&](std::array<int64_t, 4> off, int64_t n, std::array<int64_t, 4> st) {
                      for (int64_t i = 0; i < n; ++i) {
                        op[off[0] + i * st[0]] =
                            cp[off[1] + i * st[1]] ? ap[off[2] + i * st[2]] : bp[off[3] + i * st[3]];
                      }
                    });
  });
  return out;
}

}  // namespace braid::cpu
