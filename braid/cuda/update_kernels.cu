#include "braid/cuda/update_kernels.h"

namespace braid::cuda {

namespace {

// Calls f(P{}, G{}, S{}): P the parameter's element type (a float type
// computed in float), G and S each P or float as the gradient's and the
// state's dtypes say (the caller has checked they are one or the other).
template <class F>
void dispatch(DType p_dtype, DType g_dtype, DType s_dtype, F&& f) {
  visit(p_dtype, [&](auto zp) {
    using P = decltype(zp);
    if constexpr (std::is_same_v<compute_t<P>, float>) {
      auto with_g = [&](auto zg) {
        if (s_dtype == p_dtype) {
          f(zp, zg, zp);
        } else {
          f(zp, zg, float{});
        }
      };
      if (g_dtype == p_dtype) {
        with_g(zp);
      } else {
        with_g(float{});
      }
    }
  });
}

template <class P, class G, class S>
struct Sgd {
  P* p;
  const G* g;
  S* b;  // null: no momentum
  const double* scalars;
  SgdConfig c;
  BRAID_HD void operator()(int64_t k) const {
    const float lr = static_cast<float>(scalars[0]);
    const float pk = load<P>(p + k);
    const float d = load<G>(g + k) + c.weight_decay * pk;
    if (b == nullptr) {
      store<P>(p + k, pk - lr * d);
      return;
    }
    const float bk = c.first ? d : c.momentum * load<S>(b + k) + c.damp * d;
    store<S>(b + k, bk);
    store<P>(p + k, pk - lr * (c.nesterov ? d + c.momentum * bk : bk));
  }
};

// The step's constants, in double as PyTorch computes them (Python floats),
// used in float: step_size, 1 / sqrt(bias correction 2), decay.
struct AdamDerive {
  const double* scalars;
  float* out;
  AdamConfig c;
  BRAID_HD void operator()(int64_t) const {
    const double lr = scalars[0], t = scalars[1];
    const double bc1 = 1 - std::pow(c.beta1, t);
    const double bc2_sqrt = std::sqrt(1 - std::pow(c.beta2, t));
    out[0] = static_cast<float>(lr / bc1);
    out[1] = static_cast<float>(1 / bc2_sqrt);
    out[2] = c.decoupled ? static_cast<float>(1 - lr * c.weight_decay) : 1.0f;
  }
};

// Element k of one parameter's Adam step; both kernels below run this.
template <class P, class G, class S>
BRAID_HD inline void adam_element(P* p, const G* g, S* m, S* v, int64_t k, const float* derived, float b1, float b2,
                                  float eps, float l2) {
  const float step_size = derived[0], inv_bc2_sqrt = derived[1], decay = derived[2];
  const float pk = load<P>(p + k) * decay;
  const float gk = load<G>(g + k) + l2 * pk;
  const float mk = b1 * load<S>(m + k) + (1 - b1) * gk;
  const float vk = b2 * load<S>(v + k) + (1 - b2) * gk * gk;
  store<S>(m + k, mk);
  store<S>(v + k, vk);
  store<P>(p + k, pk - step_size * mk / (std::sqrt(vk) * inv_bc2_sqrt + eps));
}

template <class P, class G, class S>
struct Adam {
  P* p;
  const G* g;
  S* m;
  S* v;
  const float* derived;
  float b1, b2, eps, l2;  // l2: weight decay added to the gradient (0 when decoupled)
  BRAID_HD void operator()(int64_t k) const { adam_element(p, g, m, v, k, derived, b1, b2, eps, l2); }
};

// The tensor of a multi-tensor chunk that index i falls in: the last t < count
// with start[t] <= i (start ascending, start[0] <= i).
BRAID_HD inline int owner(const int64_t* start, int count, int64_t i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (start[mid] <= i) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Up to kAdamChunk parameters as one index space: element i belongs to the
// tensor t with start[t] <= i < start[t + 1].
template <class P, class G, class S>
struct AdamChunk {
  P* p[kAdamChunk];
  const G* g[kAdamChunk];
  S* m[kAdamChunk];
  S* v[kAdamChunk];
  int64_t start[kAdamChunk + 1];
  int count;
  const float* derived;
  float b1, b2, eps, l2;
  BRAID_HD void operator()(int64_t i) const {
    const int lo = owner(start, count, i);
    adam_element(p[lo], g[lo], m[lo], v[lo], i - start[lo], derived, b1, b2, eps, l2);
  }
};

}  // namespace

void sgd_update(DType p_dtype, DType g_dtype, DType b_dtype, void* p, const void* g, void* b, const double* scalars,
                int64_t n, const SgdConfig& c) {
  dispatch(p_dtype, g_dtype, b_dtype, [&](auto zp, auto zg, auto zs) {
    using P = decltype(zp);
    using G = decltype(zg);
    using S = decltype(zs);
    for_each(n, Sgd<P, G, S>{static_cast<P*>(p), static_cast<const G*>(g), static_cast<S*>(b), scalars, c},
             "sgd_update_");
  });
}

void adam_update(DType p_dtype, DType g_dtype, DType state_dtype, void* p, const void* g, void* m, void* v,
                 const double* scalars, float* derived, int64_t n, const AdamConfig& c) {
  if (n <= 0) return;
  for_each(1, AdamDerive{scalars, derived, c}, "adam_update_ (constants)");
  const float l2 = c.decoupled ? 0.0f : static_cast<float>(c.weight_decay);
  dispatch(p_dtype, g_dtype, state_dtype, [&](auto zp, auto zg, auto zs) {
    using P = decltype(zp);
    using G = decltype(zg);
    using S = decltype(zs);
    for_each(n, Adam<P, G, S>{static_cast<P*>(p), static_cast<const G*>(g), static_cast<S*>(m), static_cast<S*>(v),
                              derived, static_cast<float>(c.beta1), static_cast<float>(c.beta2),
                              static_cast<float>(c.eps), l2}, "adam_update_");
  });
}

void adam_update_multi(DType p_dtype, DType g_dtype, DType state_dtype, const AdamTensors* tensors, int64_t count,
                       const double* scalars, float* derived, const AdamConfig& c) {
  if (count <= 0) return;
  for_each(1, AdamDerive{scalars, derived, c}, "adam_update_ (constants)");
  const float l2 = c.decoupled ? 0.0f : static_cast<float>(c.weight_decay);
  dispatch(p_dtype, g_dtype, state_dtype, [&](auto zp, auto zg, auto zs) {
    using P = decltype(zp);
    using G = decltype(zg);
    using S = decltype(zs);
    for (int64_t first = 0; first < count; first += kAdamChunk) {
      AdamChunk<P, G, S> k{};
      k.count = static_cast<int>(std::min<int64_t>(kAdamChunk, count - first));
      k.start[0] = 0;
      for (int t = 0; t < k.count; ++t) {
        const AdamTensors& a = tensors[first + t];
        k.p[t] = static_cast<P*>(a.p);
        k.g[t] = static_cast<const G*>(a.g);
        k.m[t] = static_cast<S*>(a.m);
        k.v[t] = static_cast<S*>(a.v);
        k.start[t + 1] = k.start[t] + a.n;
      }
      k.derived = derived;
      k.b1 = static_cast<float>(c.beta1), k.b2 = static_cast<float>(c.beta2), k.eps = static_cast<float>(c.eps);
      k.l2 = l2;
      for_each(k.start[k.count], k, "adam_update_multi_");
    }
  });
}

namespace {

// Up to kAdamChunk tensors' blocks as one index space: block b belongs to the
// tensor t with first[t] <= b < first[t + 1].
struct SquaresChunk {
  const float* x[kAdamChunk];
  int64_t n[kAdamChunk];
  int64_t first[kAdamChunk + 1];
  int count;
  float* partials;  // this chunk's first partial
  BRAID_HD void operator()(int64_t b) const {
    const int lo = owner(first, count, b);
    const int64_t begin = (b - first[lo]) * kSquaresBlock;
    const int64_t end = begin + kSquaresBlock < n[lo] ? begin + kSquaresBlock : n[lo];
    float part = 0;
    for (int64_t k = begin; k < end; ++k) part += x[lo][k] * x[lo][k];
    partials[b] = part;
  }
};

// Up to kAdamChunk tensors' elements as one index space.
struct ScaleChunk {
  float* x[kAdamChunk];
  int64_t start[kAdamChunk + 1];
  int count;
  float c;
  BRAID_HD void operator()(int64_t i) const {
    const int lo = owner(start, count, i);
    x[lo][i - start[lo]] *= c;
  }
};

struct SumPartials {
  const float* partials;
  int64_t n;
  double* out;
  BRAID_HD void operator()(int64_t) const {
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += partials[i];
    *out = total;
  }
};

}  // namespace

void scale_multi(float* const* tensors, const int64_t* sizes, int64_t count, float c) {
  for (int64_t first = 0; first < count; first += kAdamChunk) {
    ScaleChunk k{};
    k.count = static_cast<int>(std::min<int64_t>(kAdamChunk, count - first));
    k.c = c;
    k.start[0] = 0;
    for (int t = 0; t < k.count; ++t) {
      k.x[t] = tensors[first + t];
      k.start[t + 1] = k.start[t] + sizes[first + t];
    }
    for_each(k.start[k.count], k, "scale_multi_");
  }
}

void sum_squares_multi(const float* const* tensors, const int64_t* sizes, int64_t count, float* partials,
                       double* out) {
  int64_t done = 0;  // partials written so far
  for (int64_t first = 0; first < count; first += kAdamChunk) {
    SquaresChunk k{};
    k.count = static_cast<int>(std::min<int64_t>(kAdamChunk, count - first));
    k.first[0] = 0;
    for (int t = 0; t < k.count; ++t) {
      k.x[t] = tensors[first + t];
      k.n[t] = sizes[first + t];
      k.first[t + 1] = k.first[t] + squares_blocks(sizes[first + t]);
    }
    k.partials = partials + done;
    for_each(k.first[k.count], k, "sum_squares_multi");
    done += k.first[k.count];
  }
  for_each(1, SumPartials{partials, done, out}, "sum_squares_multi (total)");
}

}  // namespace braid::cuda
