#include "braid/cuda/elementwise_kernels.h"

namespace braid::cuda {

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;
constexpr double kInvSqrt2 = 0.7071067811865476;

template <class C>
BRAID_HD bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  return false;
}

template <class C>
BRAID_HD C apply(UnaryOp op, C v, C a, C b) {
  switch (op) {
    case UnaryOp::neg: return static_cast<C>(-v);
    case UnaryOp::abs: return v < C(0) ? static_cast<C>(-v) : v;
    case UnaryOp::sign: return static_cast<C>((v > C(0)) - (v < C(0)));
    case UnaryOp::relu: return v > C(0) || is_nan(v) ? v : C(0);
    case UnaryOp::clamp: return v < a ? a : (v > b ? b : v);
    case UnaryOp::add: return static_cast<C>(v + a);
    case UnaryOp::mul: return static_cast<C>(v * a);
    case UnaryOp::rsub: return static_cast<C>(a - v);
    default: break;
  }
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::exp: return std::exp(v);
      case UnaryOp::log: return std::log(v);
      case UnaryOp::sqrt: return std::sqrt(v);
      case UnaryOp::sigmoid: return C(1) / (C(1) + std::exp(-v));
      case UnaryOp::tanh: return std::tanh(v);
      case UnaryOp::gelu_tanh: {
        const C inner = C(kSqrt2OverPi) * (v + C(kGeluCubic) * v * v * v);
        return C(0.5) * v * (C(1) + std::tanh(inner));
      }
      case UnaryOp::gelu_erf: return C(0.5) * v * (C(1) + std::erf(v * C(kInvSqrt2)));
      case UnaryOp::pow: return a == C(2) ? v * v : std::pow(v, a);
      case UnaryOp::rdiv: return a / v;
      default: break;
    }
  }
  return v;
}

template <class C>
BRAID_HD C apply(BinaryOp op, C x, C y) {
  switch (op) {
    case BinaryOp::add: return static_cast<C>(x + y);
    case BinaryOp::sub: return static_cast<C>(x - y);
    case BinaryOp::mul: return static_cast<C>(x * y);
    // NaN propagates, as in torch.maximum / torch.minimum.
    case BinaryOp::maximum: return x > y || is_nan(x) ? x : y;
    case BinaryOp::minimum: return x < y || is_nan(x) ? x : y;
    default: break;
  }
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case BinaryOp::div: return x / y;
      case BinaryOp::relu_grad: return y > C(0) ? x : C(0);
      case BinaryOp::sigmoid_grad: return x * y * (C(1) - y);
      case BinaryOp::tanh_grad: return x * (C(1) - y * y);
      case BinaryOp::gelu_tanh_grad: {
        const C inner = C(kSqrt2OverPi) * (y + C(kGeluCubic) * y * y * y);
        const C t = std::tanh(inner);
        const C d_inner = C(kSqrt2OverPi) * (C(1) + C(3 * kGeluCubic) * y * y);
        return x * (C(0.5) * (C(1) + t) + C(0.5) * y * (C(1) - t * t) * d_inner);
      }
      case BinaryOp::gelu_erf_grad: {
        const C cdf = C(0.5) * (C(1) + std::erf(y * C(kInvSqrt2)));
        const C pdf = std::exp(C(-0.5) * y * y) * C(0.3989422804014327);
        return x * (cdf + y * pdf);
      }
      default: break;
    }
  }
  return x;
}

template <class C>
BRAID_HD bool compare(BinaryOp op, C x, C y) {
  switch (op) {
    case BinaryOp::eq: return x == y;
    case BinaryOp::ne: return x != y;
    case BinaryOp::lt: return x < y;
    case BinaryOp::le: return x <= y;
    case BinaryOp::gt: return x > y;
    case BinaryOp::ge: return x >= y;
    default: return false;
  }
}

template <class T>
struct UnaryMap {
  Indexer<2> ix;
  T* out;
  const T* x;
  UnaryOp op;
  compute_t<T> a, b;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[2];
    ix.offsets(i, off);
    store<T>(out + off[0], apply<compute_t<T>>(op, load<T>(x + off[1]), a, b));
  }
};

template <class T>
struct BinaryMap {
  Indexer<3> ix;
  T* out;
  const T* a;
  const T* b;
  BinaryOp op;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[3];
    ix.offsets(i, off);
    store<T>(out + off[0], apply<compute_t<T>>(op, load<T>(a + off[1]), load<T>(b + off[2])));
  }
};

template <class T>
struct CompareMap {
  Indexer<3> ix;
  bool* out;
  const T* a;
  const T* b;
  BinaryOp op;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[3];
    ix.offsets(i, off);
    out[off[0]] = compare<compute_t<T>>(op, load<T>(a + off[1]), load<T>(b + off[2]));
  }
};

template <class T>
struct ClampGrad {
  Indexer<3> ix;
  T* out;
  const T* g;
  const T* x;
  double lo, hi;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[3];
    ix.offsets(i, off);
    const double v = static_cast<double>(load<T>(x + off[2]));
    store<T>(out + off[0], lo <= v && v <= hi ? load<T>(g + off[1]) : compute_t<T>(0));
  }
};

template <class T>
struct Where {
  Indexer<4> ix;
  T* out;
  const bool* cond;
  const T* a;
  const T* b;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[4];
    ix.offsets(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
};

template <class T>
struct MaskedFill {
  Indexer<3> ix;
  T* out;
  const T* x;
  const bool* mask;
  compute_t<T> value;
  BRAID_HD void operator()(int64_t i) const {
    int64_t off[3];
    ix.offsets(i, off);
    if (mask[off[2]]) {
      store<T>(out + off[0], value);
    } else {
      out[off[0]] = x[off[1]];
    }
  }
};

template <class T>
constexpr bool is_numeric = !std::is_same_v<T, bool>;

}  // namespace

void unary(UnaryOp op, DType dtype, void* out, const void* x, const Indexer<2>& ix, int64_t n, double alpha,
           double beta) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (is_numeric<T>) {
      using C = compute_t<T>;
      for_each(n, UnaryMap<T>{ix, static_cast<T*>(out), static_cast<const T*>(x), op, make<C>(alpha), make<C>(beta)},
               "unary");
    }
  });
}

void binary(BinaryOp op, DType dtype, void* out, const void* a, const void* b, const Indexer<3>& ix, int64_t n) {
  const bool comparison = op >= BinaryOp::eq && op <= BinaryOp::ge;
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if (comparison) {
      for_each(n, CompareMap<T>{ix, static_cast<bool*>(out), static_cast<const T*>(a), static_cast<const T*>(b), op},
               "compare");
    } else if constexpr (is_numeric<T>) {
      for_each(n, BinaryMap<T>{ix, static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), op},
               "binary");
    }
  });
}

void clamp_grad(DType dtype, void* out, const void* g, const void* x, const Indexer<3>& ix, int64_t n, double lo,
                double hi) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (is_numeric<T>) {
      for_each(n, ClampGrad<T>{ix, static_cast<T*>(out), static_cast<const T*>(g), static_cast<const T*>(x), lo, hi},
               "clamp_backward");
    }
  });
}

void where(DType dtype, void* out, const void* cond, const void* a, const void* b, const Indexer<4>& ix, int64_t n) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    for_each(n, Where<T>{ix, static_cast<T*>(out), static_cast<const bool*>(cond), static_cast<const T*>(a),
                         static_cast<const T*>(b)}, "where");
  });
}

void masked_fill(DType dtype, void* out, const void* x, const void* mask, const Indexer<3>& ix, int64_t n,
                 double value) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    for_each(n, MaskedFill<T>{ix, static_cast<T*>(out), static_cast<const T*>(x), static_cast<const bool*>(mask),
                              make<compute_t<T>>(value)}, "masked_fill");
  });
}

}  // namespace braid::cuda
