// profile_steps (emulated.h): a training step's demands on the device, read
// from the emulated backend's counters and from every op call of the step.
#include <algorithm>
#include <chrono>
#include <vector>

#include "braid/base/error.h"
#include "braid/cuda/emulated.h"
#include "braid/ops/registry.h"

namespace braid::cuda::emulated {

namespace {

// Every op call of the profiled steps, and the outputs that look like
// attention scores ([.., T, T] in f32 or f64).
class CallCounter final : public op::CallObserver {
 public:
  explicit CallCounter(int64_t square) : square_(square) {}
  void on_call(const op::OpDef& op, const op::Attrs& attrs, std::span<const Tensor> inputs,
               std::span<const Tensor> outputs) override {
    ++calls_;
    ++by_op_[op.name];
    std::vector<op::TensorMeta> in, out;
    for (const Tensor& t : inputs) in.push_back(op::meta_of(t));
    for (const Tensor& t : outputs) out.push_back(op::meta_of(t));
    flops_ += op::cost_of(op, in, out, attrs).flops;
    if (square_ <= 0) return;
    for (const Tensor& t : outputs) {
      if (!t.defined() || t.ndim() < 2 || (t.dtype() != DType::f32 && t.dtype() != DType::f64)) continue;
      if (t.size(-1) != square_ || t.size(-2) != square_) continue;
      ++squares_;
      largest_square_ = std::max<int64_t>(largest_square_, t.numel() * static_cast<int64_t>(itemsize(t.dtype())));
    }
  }
  int64_t calls_ = 0, squares_ = 0, largest_square_ = 0;
  double flops_ = 0;
  std::map<std::string, int64_t> by_op_;

 private:
  int64_t square_;
};

// Restores the device's mode when profiling ends, however it ends.
class NullDevice {
 public:
  explicit NullDevice(bool on) : previous_(null_device()) { set_null_device(on); }
  ~NullDevice() { set_null_device(previous_); }
  NullDevice(const NullDevice&) = delete;
  NullDevice& operator=(const NullDevice&) = delete;

 private:
  bool previous_;
};

}  // namespace

StepProfile profile_steps(const std::function<void()>& step, const ProfileOptions& o) {
  if (o.warmup < 0 || o.steps < 1) {
    fail<ValueError>("profile_steps: needs warmup >= 0 and steps >= 1, got {} and {}", o.warmup, o.steps);
  }
  NullDevice mode(o.null_device);
  for (int64_t i = 0; i < o.warmup; ++i) step();
  // The counted steps run bare, so their time is the step's own; one more
  // step, observed, names and costs its op calls (an observer's bookkeeping
  // would add to the host time it measures).
  reset_counters();
  reset_peak_memory();
  double fastest = 0;  // seconds: the step least disturbed by other work on the machine
  for (int64_t i = 0; i < o.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fastest = i == 0 ? s : std::min(fastest, s);
  }
  const Counters c = counters();
  CallCounter calls(o.square);
  {
    op::ObserveCalls observe(&calls);
    step();
  }
  const double n = static_cast<double>(o.steps);
  StepProfile p;
  p.warmup = o.warmup, p.steps = o.steps;
  p.launches = static_cast<double>(c.launches) / n;
  p.syncs = static_cast<double>(c.syncs) / n;
  p.allocations = static_cast<double>(c.allocations) / n;
  p.allocated_bytes = static_cast<double>(c.allocated_bytes) / n;
  p.to_device_bytes = static_cast<double>(c.to_device_bytes) / n;
  p.to_host_bytes = static_cast<double>(c.to_host_bytes) / n;
  p.copy_bytes = static_cast<double>(c.copy_bytes) / n;
  p.cast_bytes = static_cast<double>(c.cast_bytes) / n;
  p.copies = static_cast<double>(c.copies) / n;
  p.casts = static_cast<double>(c.casts) / n;
  p.op_calls = static_cast<double>(calls.calls_);
  p.flops = calls.flops_;
  p.host_us_per_step = 1e6 * fastest;
  p.host_us_per_op = p.op_calls > 0 ? p.host_us_per_step / p.op_calls : 0;
  p.peak_bytes = peak_memory();
  p.square_f32_outputs = static_cast<double>(calls.squares_);
  p.largest_square_bytes = calls.largest_square_;
  for (const auto& [name, k] : c.by_kernel) p.launches_by_kernel[name] = static_cast<double>(k) / n;
  for (const auto& [name, k] : calls.by_op_) p.calls_by_op[name] = static_cast<double>(k);
  return p;
}

nlohmann::json to_json(const StepProfile& p) {
  return {
      {"warmup_steps", p.warmup},
      {"measured_steps", p.steps},
      {"per_step",
       {{"launches", p.launches},
        {"syncs", p.syncs},
        {"allocations", p.allocations},
        {"allocated_bytes", p.allocated_bytes},
        {"to_device_bytes", p.to_device_bytes},
        {"to_host_bytes", p.to_host_bytes},
        {"copy_bytes", p.copy_bytes},
        {"cast_bytes", p.cast_bytes},
        {"copies", p.copies},
        {"casts", p.casts},
        {"op_calls", p.op_calls},
        {"flops", p.flops},
        {"host_us", p.host_us_per_step},
        {"square_f32_outputs", p.square_f32_outputs}}},
      {"host_us_per_op", p.host_us_per_op},
      {"peak_bytes", p.peak_bytes},
      {"largest_square_f32_bytes", p.largest_square_bytes},
      {"launches_by_kernel", p.launches_by_kernel},
      {"calls_by_op", p.calls_by_op},
  };
}

}  // namespace braid::cuda::emulated
