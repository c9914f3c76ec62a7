// The emulated backend's counters, its null device and its installation.
#include <mutex>

#include "braid/base/error.h"
#include "braid/cuda/emulated/state.h"
#include "braid/cuda/kernels.h"

namespace braid::cuda::emulated {

State& state() {
  static State* s = new State;  // never destroyed: kernels may run during static destruction
  return *s;
}

Counters counters() {
  State& s = state();
  std::lock_guard lock(s.mu);
  Counters c = s.counters;
  for (const auto& [name, n] : s.by_kernel) c.by_kernel[name] += n;  // one name may sit at several addresses
  return c;
}

void reset_counters() {
  std::lock_guard lock(state().mu);
  state().counters = Counters{};
  state().by_kernel.clear();
}

void set_null_device(bool on) {
  if (on && !state().null_device) release_cached_blocks();
  state().null_device = on;
}
bool null_device() { return state().null_device; }

bool launch(const char* what) {
  State& s = state();
  std::lock_guard lock(s.mu);
  ++s.counters.launches;
  ++s.by_kernel[what];
  return !s.null_device;
}

Capture::Capture() {
  if (state().capturing) fail<ValueError>("CUDA graph capture: a capture is already under way");
  state().capturing = true;
}
Capture::~Capture() { state().capturing = false; }
bool capturing() { return state().capturing; }

void refuse_in_capture(const char* what) {
  if (state().capturing) fail<ValueError>("CUDA graph capture: {} is not allowed on a capturing stream", what);
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    install_backend();
    install_collectives();
  });
}

}  // namespace braid::cuda::emulated
