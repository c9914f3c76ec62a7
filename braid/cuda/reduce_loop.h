// Reductions as the kernel files of the reduce, softmax and loss families see
// them (the counterpart of loop.h's for_each): `reduce(job, n_out, r)` runs
// n_out independent reductions of r elements each. A job says how to fold an
// element into an accumulator, how to combine two accumulators (associative
// and commutative, so any split of the elements gives the same answer up to
// rounding) and how to write a result:
//
//   struct Job {
//     using Acc = ...;                                  // trivially copyable, <= 16 bytes
//     BRAID_HD Acc identity() const;
//     BRAID_HD Row row(int64_t o) const;                // per-output state (base offsets)
//     BRAID_HD void fold(Acc& acc, const Row&, int64_t r) const;
//     BRAID_HD Acc combine(Acc a, Acc b) const;
//     BRAID_HD void finish(const Row&, Acc acc) const;
//   };
//
// Three shapes of launch (reduce_shape): a thread per output for many narrow
// column-like reductions (adjacent threads read adjacent memory); a block per
// output for rows and for few, long reductions; two stages through a scratch
// buffer for one long reduction (a sum of everything). Emulated builds run the
// same split of elements over "threads" and "blocks" one after another, so the
// split is checked anywhere; only the warp/shared-memory combine is GPU-only.
#pragma once

#include "braid/cuda/loop.h"

namespace braid::cuda {

// The type T accumulates in: float for f32 and the 16-bit floats, double for
// f64, int64 for the integers.
template <class T>
using acc_t = std::conditional_t<std::is_integral_v<T>, int64_t, compute_t<T>>;

// Threads per block of the block-level reductions (a multiple of the warp).
inline constexpr int kReduceThreads = 256;
// First-stage blocks of a two-stage reduction, and the scratch it needs
// (bytes: one accumulator of at most 16 bytes per block).
inline constexpr int kMaxPartials = 1024;
inline constexpr size_t kReduceScratchBytes = kMaxPartials * 16;

enum class ReduceShape : uint8_t { per_thread, per_block, two_stage };

// `contiguous`: each reduction's elements are adjacent in memory (a row).
inline ReduceShape reduce_shape(int64_t n_out, int64_t r, bool contiguous) {
  if (n_out == 1 && r >= 16 * kReduceThreads) return ReduceShape::two_stage;
  // 64: below that a block's threads mostly idle; 1024 outputs: enough
  // threads that per-thread column reductions keep the GPU busy.
  if (r >= 64 && (contiguous || n_out < 1024)) return ReduceShape::per_block;
  return ReduceShape::per_thread;
}

// First-stage blocks for one reduction of r elements: about 16 elements a
// thread, at most kMaxPartials.
inline int partial_blocks(int64_t r) {
  return static_cast<int>(std::clamp<int64_t>(r / (16 * kReduceThreads), 1, kMaxPartials));
}

// Folds elements first, first + step, ... of output `row` (one thread's share).
template <class Job, class Row>
BRAID_HD typename Job::Acc fold_strided(const Job& job, const Row& row, int64_t first, int64_t step, int64_t r) {
  typename Job::Acc acc = job.identity();
  for (int64_t i = first; i < r; i += step) job.fold(acc, row, i);
  return acc;
}

template <class Job>
struct PerThread {
  Job job;
  int64_t r;
  BRAID_HD void operator()(int64_t o) const {
    const auto row = job.row(o);
    job.finish(row, fold_strided(job, row, 0, 1, r));
  }
};

#if defined(__CUDACC__)

// v from the lane `offset` above, for any trivially copyable accumulator
// (moved as 32-bit words; __shfl_down_sync takes only scalars).
template <class A>
__device__ A shfl_down(A v, int offset) {
  static_assert(sizeof(A) % 4 == 0 && sizeof(A) <= 16, "accumulators are whole 32-bit words, at most 16 bytes");
  uint32_t w[sizeof(A) / 4];
  memcpy(w, &v, sizeof(A));
  for (auto& x : w) x = __shfl_down_sync(0xffffffffu, x, offset);
  memcpy(&v, w, sizeof(A));
  return v;
}

// The block's accumulators combined, returned to every thread. blockDim.x is
// a multiple of 32; every thread of the block calls it.
template <class A, class Combine>
__device__ A block_all(A acc, A identity, Combine combine) {
  __shared__ A warp_acc[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2) acc = combine(acc, shfl_down(acc, offset));
  if (lane == 0) warp_acc[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < warps ? warp_acc[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2) acc = combine(acc, shfl_down(acc, offset));
    if (lane == 0) warp_acc[0] = acc;
  }
  __syncthreads();
  acc = warp_acc[0];
  __syncthreads();  // warp_acc is free for the next call
  return acc;
}

template <class Job>
__device__ typename Job::Acc block_combine(const Job& job, typename Job::Acc acc) {
  return block_all(acc, job.identity(), [&](auto a, auto b) { return job.combine(a, b); });
}

template <class Job>
__global__ void reduce_per_block(Job job, int64_t n_out, int64_t r) {
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    const auto row = job.row(o);
    const auto acc = block_combine(job, fold_strided(job, row, threadIdx.x, blockDim.x, r));
    if (threadIdx.x == 0) job.finish(row, acc);
  }
}

template <class Job>
__global__ void reduce_stage1(Job job, int64_t r, typename Job::Acc* partials) {
  const auto row = job.row(0);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const auto acc = block_combine(job, fold_strided(job, row, blockIdx.x * int64_t{blockDim.x} + threadIdx.x, step, r));
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <class Job>
__global__ void reduce_stage2(Job job, int parts, const typename Job::Acc* partials) {
  auto acc = job.identity();
  for (int i = threadIdx.x; i < parts; i += blockDim.x) acc = job.combine(acc, partials[i]);
  acc = block_combine(job, acc);
  if (threadIdx.x == 0) job.finish(job.row(0), acc);
}

// n_out reductions of r elements; `scratch` (kReduceScratchBytes of device
// memory) only for ReduceShape::two_stage.
template <class Job>
void reduce(const Job& job, int64_t n_out, int64_t r, ReduceShape shape, void* scratch, const char* what) {
  if (n_out <= 0) return;
  switch (shape) {
    case ReduceShape::per_thread:
      return for_each(n_out, PerThread<Job>{job, r}, what);
    case ReduceShape::per_block: {
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(n_out, 1 << 20));
      reduce_per_block<<<blocks, kReduceThreads, 0, launch_stream()>>>(job, n_out, r);
      return check_launch(what);
    }
    case ReduceShape::two_stage: {
      using Acc = typename Job::Acc;
      static_assert(sizeof(Acc) <= 16);
      const int parts = partial_blocks(r);
      reduce_stage1<<<parts, kReduceThreads, 0, launch_stream()>>>(job, r, static_cast<Acc*>(scratch));
      check_launch(what);
      reduce_stage2<<<1, kReduceThreads, 0, launch_stream()>>>(job, parts, static_cast<const Acc*>(scratch));
      return check_launch(what);
    }
  }
}

#else

// Emulation: block b's thread t folds the same elements as on the GPU; the
// threads' accumulators are combined in thread order.
template <class Job, class Row>
typename Job::Acc emulate_block(const Job& job, const Row& row, int64_t first, int64_t step, int64_t r) {
  typename Job::Acc acc = job.identity();
  for (int t = 0; t < kReduceThreads; ++t) acc = job.combine(acc, fold_strided(job, row, first + t, step, r));
  return acc;
}

template <class Job>
void reduce(const Job& job, int64_t n_out, int64_t r, ReduceShape shape, void* scratch, const char* what) {
  if (n_out <= 0) return;
  switch (shape) {
    case ReduceShape::per_thread:
      return for_each(n_out, PerThread<Job>{job, r}, what);
    case ReduceShape::per_block:
      if (!emulated::launch(what)) return;
      for (int64_t o = 0; o < n_out; ++o) {
        const auto row = job.row(o);
        job.finish(row, emulate_block(job, row, 0, kReduceThreads, r));
      }
      return;
    case ReduceShape::two_stage: {
      using Acc = typename Job::Acc;
      static_assert(sizeof(Acc) <= 16);
      emulated::launch(what);                // stage 1's grid
      if (!emulated::launch(what)) return;   // and stage 2's
      const int parts = partial_blocks(r);
      auto* partials = static_cast<Acc*>(scratch);
      const auto row = job.row(0);
      for (int b = 0; b < parts; ++b) {
        partials[b] = emulate_block(job, row, int64_t{b} * kReduceThreads, int64_t{parts} * kReduceThreads, r);
      }
      Acc acc = job.identity();
      for (int b = 0; b < parts; ++b) acc = job.combine(acc, partials[b]);
      return job.finish(row, acc);
    }
  }
}

#endif

}  // namespace braid::cuda
