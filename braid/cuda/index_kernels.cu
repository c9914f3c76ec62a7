#include "braid/cuda/index_kernels.h"

#include "braid/cuda/memory.h"

namespace braid::cuda {

namespace {

// Selections copy elements as unsigned words of their size: one kernel per
// size serves every dtype.
template <class F>
void by_size(size_t elem_bytes, F&& f) {
  switch (elem_bytes) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

template <class U>
struct SelectRows {
  U* out;
  const U* x;
  const int64_t* index;
  IndexGeometry s;
  BRAID_HD void operator()(int64_t i) const {  // i over out [A, J, B]
    const int64_t b = i % s.B, row = i / s.B, j = row % s.J, a = row / s.J, r = index[j];
    out[i] = r >= 0 && r < s.R ? x[(a * s.R + r) * s.B + b] : U{0};  // out of range: raised at the next sync
  }
};

template <class U>
struct GatherElements {
  U* out;
  const U* x;
  const int64_t* index;
  IndexGeometry s;
  BRAID_HD void operator()(int64_t i) const {  // i over out = index [A, J, B]
    const int64_t b = i % s.B, a = i / s.B / s.J, r = index[i];
    out[i] = r >= 0 && r < s.R ? x[(a * s.R + r) * s.B + b] : U{0};
  }
};

// Where src element i of [A, J, B] adds into acc [A, R, B]: row index[j] for
// index_add (per_element false), index[i] for scatter_add.
template <class T>
struct AddAt {
  compute_t<T>* acc;
  const T* src;
  const int64_t* index;
  IndexGeometry s;
  bool per_element;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t b = i % s.B, row = i / s.B, a = row / s.J;
    const int64_t r = index[per_element ? i : row % s.J];
    if (r < 0 || r >= s.R) return;  // raised at the next sync
    atomic_add(acc + (a * s.R + r) * s.B + b, load<T>(src + i));
  }
};

template <class T>
BRAID_HD compute_t<T> bag_scale(const Bags& bags, int64_t b, int64_t k) {
  using C = compute_t<T>;
  if (bags.mean) return C(1) / static_cast<C>(bags.start[b + 1] - bags.start[b]);
  return bags.psw != nullptr ? load<T>(static_cast<const T*>(bags.psw) + k) : C(1);
}

// Adds in position order, as the CPU kernel does, so f32 sums agree.
template <class T>
struct BagForward {
  T* out;
  const T* w;
  Bags bags;
  BRAID_HD void operator()(int64_t i) const {  // i over out [B, D]
    const int64_t b = i / bags.D, j = i % bags.D;
    compute_t<T> y = 0;
    for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
      y += bag_scale<T>(bags, b, k) * load<T>(w + bags.idx[k] * bags.D + j);
    }
    store<T>(out + i, y);
  }
};

// A thread per (bag, column) scatters that column of the bag's gradient into
// every row the bag read; rows shared between bags meet in atomic adds.
template <class T>
struct BagBackwardWeight {
  compute_t<T>* acc;
  const T* g;
  Bags bags;
  BRAID_HD void operator()(int64_t i) const {  // i over g [B, D]
    const int64_t b = i / bags.D, j = i % bags.D;
    const compute_t<T> gv = load<T>(g + i);
    for (int64_t k = bags.start[b]; k < bags.start[b + 1]; ++k) {
      atomic_add(acc + bags.idx[k] * bags.D + j, bag_scale<T>(bags, b, k) * gv);
    }
  }
};

// The bag holding position k: the last b with start[b] <= k (empty bags
// repeat a start; k < start[B] = n).
BRAID_HD inline int64_t bag_of(const Bags& bags, int64_t k) {
  int64_t lo = 0, hi = bags.B;  // answer in [lo, hi)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (bags.start[mid] <= k) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <class T>
struct BagBackwardPsw {
  T* gp;
  const T* g;
  const T* w;
  Bags bags;
  BRAID_HD void operator()(int64_t k) const {  // k over positions [n]
    const T* gb = g + bag_of(bags, k) * bags.D;
    const T* row = w + bags.idx[k] * bags.D;
    compute_t<T> acc = 0;
    for (int64_t j = 0; j < bags.D; ++j) acc += load<T>(gb + j) * load<T>(row + j);
    store<T>(gp + k, acc);
  }
};

template <class T>
constexpr bool floating = std::is_floating_point_v<compute_t<T>>;

struct RangeCheck {
  const int64_t* index;
  int64_t bound, check;
  CheckRecord* record;
  BRAID_HD void operator()(int64_t i) const {
    const int64_t v = index[i];
    if (v >= 0 && v < bound) return;
    if (atomic_claim(&record->check, check)) {  // the first failure of any check since the last sync
      record->position = i;
      record->value = v;
    }
  }
};

}  // namespace

void range_check(const int64_t* index, int64_t n, int64_t bound, int64_t check, CheckRecord* record) {
  for_each(n, RangeCheck{index, bound, check, record}, "range_check");
}

void index_select_rows(size_t elem_bytes, void* out, const void* x, const int64_t* index, const IndexGeometry& s) {
  by_size(elem_bytes, [&](auto z) {
    using U = decltype(z);
    for_each(s.A * s.J * s.B, SelectRows<U>{static_cast<U*>(out), static_cast<const U*>(x), index, s}, "index_select");
  });
}

void gather_elements(size_t elem_bytes, void* out, const void* x, const int64_t* index, const IndexGeometry& s) {
  by_size(elem_bytes, [&](auto z) {
    using U = decltype(z);
    for_each(s.A * s.J * s.B, GatherElements<U>{static_cast<U*>(out), static_cast<const U*>(x), index, s}, "gather");
  });
}

void index_add_rows(DType dtype, void* acc, const void* src, const int64_t* index, const IndexGeometry& s) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(s.A * s.J * s.B,
               AddAt<T>{static_cast<compute_t<T>*>(acc), static_cast<const T*>(src), index, s, false}, "index_add");
    }
  });
}

void scatter_add_elements(DType dtype, void* acc, const void* src, const int64_t* index, const IndexGeometry& s) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(s.A * s.J * s.B,
               AddAt<T>{static_cast<compute_t<T>*>(acc), static_cast<const T*>(src), index, s, true}, "scatter_add");
    }
  });
}

void bag_forward(DType dtype, void* out, const void* w, const Bags& bags) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(bags.B * bags.D, BagForward<T>{static_cast<T*>(out), static_cast<const T*>(w), bags}, "embedding_bag");
    }
  });
}

void bag_backward_weight(DType dtype, void* acc, const void* g, const Bags& bags) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(bags.B * bags.D, BagBackwardWeight<T>{static_cast<compute_t<T>*>(acc), static_cast<const T*>(g), bags},
               "embedding_bag_backward");
    }
  });
}

void bag_backward_psw(DType dtype, void* gp, const void* g, const void* w, const Bags& bags) {
  visit(dtype, [&](auto z) {
    using T = decltype(z);
    if constexpr (floating<T>) {
      for_each(bags.n, BagBackwardPsw<T>{static_cast<T*>(gp), static_cast<const T*>(g), static_cast<const T*>(w), bags},
               "embedding_bag_per_sample_weights_backward");
    }
  });
}

}  // namespace braid::cuda
