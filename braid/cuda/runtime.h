// The CUDA runtime as braid uses it: errors as exceptions that name the call,
// the GPUs this process sees, and a current stream per thread and device, so
// that communication can run on its own stream beside compute.
//
//   cuda::Stream comm_stream(device);
//   { cuda::StreamGuard on(comm_stream); ... }   // kernels and copies go there
//   cuda::Event done = cuda::Event::record(comm_stream);
//   cuda::wait(cuda::current_stream(device), done);
#pragma once

#include <cuda_runtime.h>

#include "braid/tensor/device.h"

namespace braid::cuda {

// Throws braid::Error "CUDA error in <what>: <message>" unless e is success.
void check(cudaError_t e, const char* what);
// GPUs visible to this process; 0 where there is no driver or no GPU.
int device_count();
// Makes `index` this thread's CUDA device (a no-op when it already is).
void set_device(int index);
// This thread's CUDA device.
int current_device();

// A stream that owns its handle (non-blocking with respect to the legacy
// default stream).
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
  int device_ = 0;
};

// The stream this thread's kernels and copies on `device` go to: the innermost
// StreamGuard's, else the device's main stream (one per device and process).
cudaStream_t current_stream(int device);

class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

// A point in a stream's work; streams wait on events without the host waiting.
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  static Event record(cudaStream_t stream);
  bool done() const;
  void synchronize() const;
  cudaEvent_t get() const { return event_; }
  // Seconds between two recorded events (both must be timed).
  static double elapsed(const Event& start, const Event& end);

 private:
  cudaEvent_t event_ = nullptr;
};

// Work queued on `stream` from now on waits for `event`.
void wait(cudaStream_t stream, const Event& event);

}  // namespace braid::cuda
