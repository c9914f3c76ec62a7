// Inside the attention kernels (attention.cc, attention_backward.cc): sizes,
// strided operands and the task loop they share.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>

#include "braid/tensor/cpu/vmath.h"
#include "braid/tensor/tensor.h"

namespace braid::cpu::sdpa {

struct Dims {
  int64_t b = 0, tq = 0, tk = 0, hq = 0, hkv = 0, d = 0;
  int64_t group = 1;  // query heads per key-value head
  int64_t shift = 0;  // tk - tq: query i sees keys j <= i + shift under causal masking
};
Dims dims_of(const Tensor& q, const Tensor& k);

// A [B, T, H, D] tensor read through its strides.
template <class T>
struct Operand {
  const T* base;
  int64_t sb, st, sh, sd;
  explicit Operand(const Tensor& x)
      : base(x.data<T>()), sb(x.strides()[0]), st(x.strides()[1]), sh(x.strides()[2]), sd(x.strides()[3]) {}
  const T* at(int64_t b, int64_t t, int64_t h) const { return base + b * sb + t * st + h * sh; }
};

// x[i] = exp(x[i]); exp(-inf) = 0.
inline void exp_inplace(float* x, int64_t n) { exp_f32(x, x, n); }
inline void exp_inplace(double* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

// Hands out task numbers 0, 1, ... to whichever thread asks first; -1 when
// none are left.
using TaskSource = std::function<int64_t()>;
// Runs `worker` once on each of min(tasks, pool size) threads (it makes its
// scratch once, then takes tasks from `next` until none are left). Which
// thread runs a task does not change its result.
void run_tasks(int64_t tasks, const std::function<void(const TaskSource& next)>& worker);

}  // namespace braid::cpu::sdpa
