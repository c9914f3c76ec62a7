// What braid's oneDNN kernels share (convolution, bf16 GEMM): one CPU engine,
// a stream per calling thread, and scratch memory from braid's caching
// allocator. Each user builds its primitives once per shape and thread count
// and caches them (building one costs far more than running it on braid's
// shapes), with user-managed scratchpads allocated per call, so concurrent
// calls from several threads never share one.
#pragma once

#include <dnnl.hpp>

#include <cstddef>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::cpu::onednn {

dnnl::engine& engine();
// The calling thread's stream on engine().
dnnl::stream& stream();
// A buffer of `bytes` from the caching allocator, kept alive by `keep`.
void* scratch(size_t bytes, std::vector<Tensor>& keep);
// Whether oneDNN has bf16 kernels for this CPU (it needs AVX-512; it has none
// for AVX2-only CPUs, or under ONEDNN_MAX_CPU_ISA=AVX2). Probed once.
bool has_bf16();

}  // namespace braid::cpu::onednn
