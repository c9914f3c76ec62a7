#include "braid/ops/index.h"

#include <algorithm>

#include "braid/autograd/node.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/matmul.h"
#include "braid/tensor/cpu/index.h"
#include "braid/tensor/cpu/loops.h"

namespace braid {

namespace {
using autograd::record;
using Grads = std::vector<Tensor>;

// embedding_bag's inputs, checked and contiguous. Bag b covers positions
// [start[b], start[b + 1]) of idx (and psw, when defined).
struct Bags {
  Tensor idx;                  // i64 [n], every value in [0, V)
  Tensor psw;                  // weight's dtype [n], or undefined
  std::vector<int64_t> start;  // [B + 1], start[B] == n
  EmbeddingBagMode mode;
  int64_t size(int64_t b) const { return start[b + 1] - start[b]; }
  // Factor of position k (in bag b) in its bag's output.
  template <class T>
  T scale(const T* psw_p, int64_t b, int64_t k) const {
    if (mode == EmbeddingBagMode::mean) return T(1) / static_cast<T>(size(b));
    return psw_p != nullptr ? psw_p[k] : T(1);
  }
};

Bags check_bags(const Tensor& weight, const Tensor& indices, const Tensor& offsets, const Tensor& psw,
                EmbeddingBagMode mode) {
  constexpr const char* op = "embedding_bag";
  if (weight.ndim() != 2) {
    fail<ValueError>("{}: weight must be [V, D], got {} (indices {}, offsets {})", op, to_string(weight.shape()),
                     to_string(indices.shape()), to_string(offsets.shape()));
  }
  detail::check_float(op, weight);
  if (indices.dtype() != DType::i64 || indices.ndim() != 1 || offsets.dtype() != DType::i64 || offsets.ndim() != 1) {
    fail<ValueError>("{}: indices and offsets must be 1-D i64, got indices {} {} and offsets {} {}", op,
                     name(indices.dtype()), to_string(indices.shape()), name(offsets.dtype()),
                     to_string(offsets.shape()));
  }
  if (mode != EmbeddingBagMode::sum && mode != EmbeddingBagMode::mean) {
    fail<ValueError>("{}: unknown mode {}", op, static_cast<int>(mode));
  }
  const int64_t n = indices.numel(), B = offsets.numel(), V = weight.size(0);
  if (psw.defined()) {
    if (mode != EmbeddingBagMode::sum) fail<ValueError>("{}: per_sample_weights need mode sum", op);
    if (psw.ndim() != 1 || psw.numel() != n || psw.dtype() != weight.dtype()) {
      fail<ValueError>("{}: per_sample_weights must be {} [{}] like indices, got {} {}", op, name(weight.dtype()), n,
                       name(psw.dtype()), to_string(psw.shape()));
    }
  }
  Bags bags{indices.contiguous(), psw.defined() ? psw.contiguous() : Tensor{}, {}, mode};
  const Tensor oc = offsets.contiguous();
  const int64_t* o = oc.data<int64_t>();
  if (B == 0 && n > 0) fail<ValueError>("{}: {} indices but no bags (offsets is empty)", op, n);
  bags.start.assign(o, o + B);
  bags.start.push_back(n);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t lo = b == 0 ? 0 : o[b - 1];
    if (b == 0 ? o[0] != 0 : (o[b] < lo || o[b] > n)) {
      fail<ValueError>("{}: offsets[{}] = {} must be {} (offsets {}, {} indices)", op, b, o[b],
                       b == 0 ? "0" : fmt::format("in [offsets[{}] = {}, {}]", b - 1, lo, n), to_string(offsets.shape()),
                       n);
    }
  }
  const int64_t* ip = bags.idx.data<int64_t>();
  for (int64_t k = 0; k < n; ++k) {
    if (ip[k] < 0 || ip[k] >= V) {
      fail<IndexError>("{}: indices[{}] = {} out of range for weight {}", op, k, ip[k], to_string(weight.shape()));
    }
  }
  return bags;
}

// out [B, D] = the pooled rows; bags split over the pool.
template <class T>
void bag_forward(const Bags& bags, const T* w, int64_t D, T* out) {
  const int64_t B = static_cast<int64_t>(bags.start.size()) - 1, n = bags.start.back();
  const int64_t* ip = bags.idx.data<int64_t>();
  const T* pp = bags.psw.defined() ? bags.psw.data<T>() : nullptr;
  const int64_t work_per_bag = std::max<int64_t>(1, (n / std::max<int64_t>(B, 1) + 1) * D);
  parallel_for(0, B, std::max<int64_t>(1, cpu::kParallelGrain / work_per_bag), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      T* y = out + b * D;
      std::fill(y, y + D, T(0));
      for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
        const T s = bags.scale(pp, b, k);
        const T* row = w + ip[k] * D;
        for (int64_t j = 0; j < D; ++j) y[j] += s * row[j];
      }
    }
  });
}

// gw [V, D] += scale_k * g[bag of k] at row indices[k]. Tasks own disjoint
// column blocks of gw (as in cpu::index_add_into), so repeated indices never
// race and the sum order is fixed.
template <class T>
void bag_backward_weight(const Bags& bags, const T* g, int64_t D, T* gw) {
  constexpr int64_t kBlock = 512;
  const int64_t B = static_cast<int64_t>(bags.start.size()) - 1, n = bags.start.back();
  const int64_t* ip = bags.idx.data<int64_t>();
  const T* pp = bags.psw.defined() ? bags.psw.data<T>() : nullptr;
  const int64_t blocks = (D + kBlock - 1) / kBlock;
  parallel_for(0, blocks, std::max<int64_t>(1, cpu::kParallelGrain / (std::max<int64_t>(n, 1) * kBlock)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t t = lo; t < hi; ++t) {
                   const int64_t j0 = t * kBlock, j1 = std::min(D, j0 + kBlock);
                   for (int64_t b = 0; b < B; ++b) {
                     const T* gb = g + b * D;
                     for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
                       const T s = bags.scale(pp, b, k);
                       T* row = gw + ip[k] * D;
                       for (int64_t j = j0; j < j1; ++j) row[j] += s * gb[j];
                     }
                   }
                 }
               });
}

// gpsw[k] = dot(g[bag of k], w[indices[k]]); bags split over the pool.
template <class T>
void bag_backward_psw(const Bags& bags, const T* g, const T* w, int64_t D, T* gp) {
  const int64_t B = static_cast<int64_t>(bags.start.size()) - 1, n = bags.start.back();
  const int64_t* ip = bags.idx.data<int64_t>();
  const int64_t work_per_bag = std::max<int64_t>(1, (n / std::max<int64_t>(B, 1) + 1) * D);
  parallel_for(0, B, std::max<int64_t>(1, cpu::kParallelGrain / work_per_bag), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
        const T* row = w + ip[k] * D;
        T acc = T(0);
        for (int64_t j = 0; j < D; ++j) acc += g[b * D + j] * row[j];
        gp[k] = acc;
      }
    }
  });
}

// Gradients for {weight, per_sample_weights}; w (the weight, contiguous) is
// defined only when need_psw.
template <class T>
Grads embedding_bag_backward(const Tensor& g, const Bags& bags, const Shape& wshape, const Tensor& w, bool need_w,
                             bool need_psw) {
  const Tensor gc = g.contiguous();
  const int64_t D = wshape[1];
  Grads grads(2);
  if (need_w) {
    grads[0] = Tensor::zeros(wshape, g.dtype());
    bag_backward_weight<T>(bags, gc.data<T>(), D, grads[0].data<T>());
  }
  if (need_psw) {
    grads[1] = Tensor::empty({bags.start.back()}, g.dtype());
    bag_backward_psw<T>(bags, gc.data<T>(), w.data<T>(), D, grads[1].data<T>());
  }
  return grads;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  if (weight.ndim() != 2) {
    fail<ValueError>("embedding: weight must be [V, D], got {} (indices {})", to_string(weight.shape()),
                     to_string(indices.shape()));
  }
  const Tensor flat = indices.contiguous().as_strided({indices.numel()}, {1}, indices.contiguous().offset());
  Tensor rows = cpu::index_select(weight, 0, flat, "embedding");  // [n, D]
  Shape shape = indices.shape();
  shape.push_back(weight.size(1));
  Tensor y = rows.as_strided(shape, contiguous_strides(shape), 0);
  record("embedding", {weight}, y, [wshape = weight.shape(), dtype = weight.dtype(), flat](const Tensor& g) {
    Tensor gw = Tensor::zeros(wshape, dtype);
    const Tensor gc = g.contiguous();
    cpu::index_add_into(gw, 0, flat, gc.as_strided({flat.numel(), wshape[1]}, {wshape[1], 1}, gc.offset()),
                        "embedding");
    return Grads{gw};
  });
  return y;
}

Tensor embedding_bag(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                     const Tensor& per_sample_weights, EmbeddingBagMode mode) {
  Bags bags = check_bags(weight, indices, offsets, per_sample_weights, mode);
  const int64_t B = offsets.numel(), D = weight.size(1);
  const bool f32 = weight.dtype() == DType::f32;
  const Tensor wc = weight.contiguous();
  Tensor y = Tensor::empty({B, D}, weight.dtype());
  if (f32) {
    bag_forward<float>(bags, wc.data<float>(), D, y.data<float>());
  } else {
    bag_forward<double>(bags, wc.data<double>(), D, y.data<double>());
  }
  // Saved: the checked indices and offsets; the weight only when
  // per_sample_weights need its rows.
  const bool need_psw = per_sample_weights.defined() && per_sample_weights.requires_grad();
  bags.idx = bags.idx.detach();
  if (bags.psw.defined()) bags.psw = bags.psw.detach();
  record("embedding_bag", {weight, per_sample_weights}, y,
         [bags = std::move(bags), wd = need_psw ? wc.detach() : Tensor{}, wshape = weight.shape(), f32,
          need_w = weight.requires_grad(), need_psw](const Tensor& g) {
           return f32 ? embedding_bag_backward<float>(g, bags, wshape, wd, need_w, need_psw)
                      : embedding_bag_backward<double>(g, bags, wshape, wd, need_w, need_psw);
         });
  return y;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = cpu::index_select(x, dim, index, "index_select");
  record("index_select", {x}, y, [shape = x.shape(), dtype = x.dtype(), dim, idx = index.detach()](const Tensor& g) {
    Tensor gx = Tensor::zeros(shape, dtype);
    cpu::index_add_into(gx, dim, idx, g, "index_select");
    return Grads{gx};
  });
  return y;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor y = cpu::gather(x, dim, index, "gather");
  record("gather", {x}, y, [shape = x.shape(), dtype = x.dtype(), dim, idx = index.detach()](const Tensor& g) {
    Tensor gx = Tensor::zeros(shape, dtype);
    cpu::scatter_add_into(gx, dim, idx, g, "gather");
    return Grads{gx};
  });
  return y;
}

}  // namespace braid
