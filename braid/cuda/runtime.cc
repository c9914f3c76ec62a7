#include "braid/cuda/runtime.h"

#include <array>
#include <mutex>

#include "braid/base/error.h"

namespace braid::cuda {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail<Error>("CUDA error in {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver or no GPU: a CPU-only machine
      return 0;
    }
    return n;
  }();
  return count;
}

namespace {
// The calling thread's device as set through set_device: every op sets its
// inputs' device, and the runtime's own calls cost a microsecond each.
thread_local int t_device = -1;
}  // namespace

void set_device(int index) {
  if (t_device == index) return;
  check(cudaSetDevice(index), "cudaSetDevice");
  t_device = index;
}

int current_device() {
  if (t_device < 0) check(cudaGetDevice(&t_device), "cudaGetDevice");
  return t_device;
}

namespace {
constexpr int kMaxDevices = 128;

// Each device's main stream, created on first use and kept for the process.
cudaStream_t main_stream(int device) {
  static std::array<cudaStream_t, kMaxDevices> streams{};
  static std::array<std::once_flag, kMaxDevices> once;
  std::call_once(once[device], [device] {
    const int previous = current_device();
    set_device(device);
    check(cudaStreamCreateWithFlags(&streams[device], cudaStreamNonBlocking), "cudaStreamCreate");
    set_device(previous);
  });
  return streams[device];
}

thread_local std::array<cudaStream_t, kMaxDevices> t_current{};
}  // namespace

Stream::Stream(int device) : device_(device) {
  const int previous = current_device();
  set_device(device);
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  set_device(previous);
}

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Stream::synchronize() const { check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

cudaStream_t current_stream(int device) {
  if (cudaStream_t s = t_current[device]) return s;
  return main_stream(device);
}

StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device()), previous_(t_current[stream.device()]) {
  t_current[device_] = stream.get();
}

StreamGuard::~StreamGuard() { t_current[device_] = previous_; }

Event::Event() { check(cudaEventCreate(&event_), "cudaEventCreate"); }
Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}
Event::Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
Event& Event::operator=(Event&& other) noexcept {
  std::swap(event_, other.event_);
  return *this;
}

Event Event::record(cudaStream_t stream) {
  Event e;
  check(cudaEventRecord(e.event_, stream), "cudaEventRecord");
  return e;
}

bool Event::done() const {
  const cudaError_t e = cudaEventQuery(event_);
  if (e == cudaErrorNotReady) return false;
  check(e, "cudaEventQuery");
  return true;
}

void Event::synchronize() const { check(cudaEventSynchronize(event_), "cudaEventSynchronize"); }

double Event::elapsed(const Event& start, const Event& end) {
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start.event_, end.event_), "cudaEventElapsedTime");
  return ms * 1e-3;
}

void wait(cudaStream_t stream, const Event& event) {
  check(cudaStreamWaitEvent(stream, event.get(), 0), "cudaStreamWaitEvent");
}

// The launch side of loop.h: kernels go to the current stream of the thread's
// current device, and a failed launch throws at once, naming the kernel.
cudaStream_t launch_stream() {
  return current_stream(current_device());
}

void check_launch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) fail<Error>("CUDA error launching {}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

}  // namespace braid::cuda
