// Helpers for the collective tests: a world of inproc ranks as threads, and
// exactly representable inputs with their naive gather-then-reduce reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "braid/comm/communicator.h"
#include "braid/comm/transport/inproc.h"
#include "tests/comm/thread_ranks.h"

namespace braid::comm::testing {

// One communicator per rank over a fresh inproc world; runs fn(rank, comm) on
// p threads and rethrows the first error.
inline void run_world(int p, const std::function<void(int, Communicator&)>& fn,
                      const std::function<CommOptions(int)>& options = nullptr) {
  auto world = InprocWorld::create(p);
  std::vector<Communicator> comms;
  for (int r = 0; r < p; ++r)
    comms.emplace_back(std::shared_ptr<Transport>(world->transport(r)), options ? options(r) : CommOptions{});
  on_threads(p, [&](int r) { fn(r, comms[r]); });
}

// Input element i of rank r for `op`, as a double that every dtype holds
// exactly: small integers for sum/avg/min/max, +-1 and 2 for prod (products of
// 9 ranks stay within bf16's 8-bit mantissa).
inline double input_value(Op op, int r, size_t i) {
  if (op == Op::prod) {
    if ((r + i) % 5 == 0) return 2;
    return (r * 3 + i) % 4 == 0 ? -1 : 1;
  }
  return static_cast<double>(static_cast<int>((r * 7 + i * 3) % 11) - 5);
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, f16> || std::is_same_v<T, bf16>) return static_cast<float>(v);
  else return static_cast<double>(v);
}

// Naive reference: all ranks' inputs reduced in rank order, in double (exact
// for these inputs), then avg divided as the dtype divides.
template <class T>
double reference(Op op, int p, size_t i) {
  double acc = input_value(op, 0, i);
  for (int r = 1; r < p; ++r) {
    const double v = input_value(op, r, i);
    switch (op) {
      case Op::sum: case Op::avg: acc += v; break;
      case Op::prod: acc *= v; break;
      case Op::min: acc = std::min(acc, v); break;
      case Op::max: acc = std::max(acc, v); break;
    }
  }
  if (op == Op::avg) {
    if constexpr (std::is_integral_v<T>) return static_cast<double>(static_cast<T>(acc) / static_cast<T>(p));
    else return acc / p;
  }
  return acc;
}

// Tolerance for comparing a result element with the reference.
template <class T>
double tolerance(Op op, double ref) {
  if (op != Op::avg) return 0;  // everything else is exact by construction
  if constexpr (std::is_same_v<T, f16>) return 1e-3 * std::max(1.0, std::abs(ref)) + 1e-3;
  else if constexpr (std::is_same_v<T, bf16>) return 8e-3 * std::max(1.0, std::abs(ref));
  else if constexpr (std::is_same_v<T, float>) return 1e-6 * std::max(1.0, std::abs(ref));
  else return 1e-12 * std::max(1.0, std::abs(ref));
}

inline constexpr DType kCollectiveDTypes[] = {DType::f32, DType::f64, DType::f16,
                                              DType::bf16, DType::i32, DType::i64};
inline constexpr Op kOps[] = {Op::sum, Op::prod, Op::min, Op::max, Op::avg};

}  // namespace braid::comm::testing
