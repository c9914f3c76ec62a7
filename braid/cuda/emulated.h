// The emulated CUDA backend (library braid_cuda_emulated, built everywhere):
// the backend's kernels compiled as host loops (loop.h), its glue, device
// memory that is host memory behind the same stream-ordered caching allocator
// as a GPU's, and reference loops for cuBLAS and cuDNN. It serves two ends:
//
// - correctness: braid_cuda_emulated_test runs the op table on this "device"
//   against the CPU backend in every CI run;
// - step budgets: it counts what a training step asks of a GPU (kernel
//   launches, host<->device waits, system allocations, bytes moved by copies
//   and casts) and, on the null device, times the host's own work per op with
//   no kernel run (`braid profile CONFIG --emulate`, docs/gpu.md).
//
// Nothing installs it at start-up: a program calls install() (the emulated
// test binary does so from a static initialiser, `braid profile` when asked),
// and a build with CUDA never links it, since both define the cuda device.
// Counters are process-wide: one thread drives a profiled step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace braid::cuda::emulated {

// Makes the emulated GPU the `cuda` device and adds its kernels to every op;
// once per process (later calls do nothing).
void install();

// Registers the emulated NCCL and the host-staged collectives for cuda
// buffers (emulated/nccl.cc); install() does. Registration is process-wide:
// a test that put other collectives in their place calls this to restore them.
void install_collectives();

// Forgets every emulated NCCL communicator (emulated/nccl.cc): one that was
// aborted by a timeout refuses later calls, and the next in-process world
// reuses its communicators' ids and ranks.
void reset_collectives();

struct Counters {
  int64_t launches = 0;       // kernels: each grid of a kernel of ours, each GEMM, each convolution
  int64_t syncs = 0;          // times the host waited for the device (copies to the host, synchronize)
  int64_t allocations = 0;    // device memory taken from the system (the caching allocator's misses)
  int64_t allocated_bytes = 0;  // their bytes
  int64_t to_device_bytes = 0, to_host_bytes = 0;  // copies between host and device
  int64_t copy_bytes = 0;     // bytes read + written by strided copies on the device of one dtype
  int64_t cast_bytes = 0;     // the same for copies that change the dtype
  int64_t copies = 0, casts = 0;  // how many of each
  std::map<std::string, int64_t> by_kernel;  // launches by the kernel's name
};

// The counts since the last reset_counters().
Counters counters();
void reset_counters();

// The null device: launches are counted and their kernels not run (products
// and convolutions too), so a step's host time is the framework's alone.
// Copies between host and device still move their bytes. Turning it on gives
// the cached free blocks back, and blocks come zeroed from the system, so
// whatever a step reads (a loss, a gradient norm) is finite.
void set_null_device(bool on);
bool null_device();

// Called by every emulated launch site (loop.h): counts it and says whether to
// run the kernel (false on the null device).
bool launch(const char* what);

// CUDA graph capture as the emulated device enforces it: while a Capture is
// alive, what a captured stream may not do throws ValueError naming it — a
// wait of the host for the device, device memory from the system (the cache
// may serve it), a copy to the device from pageable host memory larger than
// the pinned staging ring's 64 KiB slot (memory.cc). So CI shows whether a
// step could be captured before any GPU is lent.
class Capture {
 public:
  Capture();
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
};
bool capturing();

// Bytes of device memory held by tensors: now and the most since the last
// reset_peak_memory() (the caching allocator's figures).
int64_t memory_in_use();
int64_t peak_memory();
void reset_peak_memory();

// What one profiled training step asked of the device, averaged over the
// measured steps (after the warm-up ones).
struct StepProfile {
  int64_t warmup = 0, steps = 0;
  double launches = 0, syncs = 0, allocations = 0, allocated_bytes = 0;
  double to_device_bytes = 0, to_host_bytes = 0, copy_bytes = 0, cast_bytes = 0, copies = 0, casts = 0;
  double op_calls = 0;           // op::call()s, forward, backward and update
  double flops = 0;              // the calls' arithmetic by the ops' cost rules (registry.h)
  double host_us_per_step = 0;   // wall time of the fastest counted step (on the null device: no kernels run)
  double host_us_per_op = 0;     // host_us_per_step / op_calls
  int64_t peak_bytes = 0;        // device memory held at the peak of the measured steps
  // Op outputs of f32 or f64 whose last two dims are both `square` (an
  // attention score or probability tensor [.., T, T]); 0 where square is 0.
  double square_f32_outputs = 0;
  int64_t largest_square_bytes = 0;
  std::map<std::string, double> launches_by_kernel;
  std::map<std::string, double> calls_by_op;
};

struct ProfileOptions {
  // Steps run first and not counted: the first makes the optimizer state;
  // the caching allocator took its last block from the system in the third
  // step of tests/cuda/emulated_budget_test.cc's small GPT, in the fourth of
  // GPT-2 124M (batch 1 x 1024), and none after five.
  int64_t warmup = 5;
  int64_t steps = 3;    // steps counted
  bool null_device = true;  // false: kernels run (slow: reference loops), host time then includes them
  int64_t square = 0;   // the sequence length whose [.., T, T] f32 outputs are counted; 0: none
};

// Runs `step` (one training step on the emulated device) warmup + steps + 1
// times: the counters are the mean of `steps` bare steps, the host time the
// fastest of them,
// the op calls (names, FLOPs, score-shaped outputs) those of the last one,
// run under an observer.
StepProfile profile_steps(const std::function<void()>& step, const ProfileOptions& options = {});

nlohmann::json to_json(const StepProfile& p);

}  // namespace braid::cuda::emulated
