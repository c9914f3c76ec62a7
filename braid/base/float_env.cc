#include "braid/base/float_env.h"

#include <omp.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "braid/base/error.h"
#include "braid/base/thread_pool.h"

namespace braid {

namespace {

#if defined(__SSE__)
constexpr unsigned kFlushToZero = 1u << 15;       // MXCSR.FTZ: subnormal results become 0
constexpr unsigned kDenormalsAreZero = 1u << 6;   // MXCSR.DAZ: subnormal operands read as 0
constexpr unsigned kBits = kFlushToZero | kDenormalsAreZero;

void set_this_thread(bool on) { _mm_setcsr(on ? _mm_getcsr() | kBits : _mm_getcsr() & ~kBits); }
#endif

}  // namespace

bool can_flush_denormals() {
#if defined(__SSE__)
  return true;
#else
  return false;
#endif
}

void set_flush_denormals(bool on) {
#if defined(__SSE__)
  set_this_thread(on);
  // Every thread of the pool as it is now: one region as wide as the pool.
#pragma omp parallel num_threads(num_threads())
  set_this_thread(on);
#else
  if (on) fail<ConfigError>("flushing subnormal floats to zero is not supported on this CPU (x86 SSE only)");
#endif
}

bool flushing_denormals() {
#if defined(__SSE__)
  return (_mm_getcsr() & kBits) == kBits;
#else
  return false;
#endif
}

}  // namespace braid
