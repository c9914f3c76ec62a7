#include "braid/parallel/codec_hook.h"

#include <cstring>

#include "braid/base/thread_name.h"
#include "braid/comm/codec/device.h"

namespace braid::parallel {

namespace cc = comm::codec;

CodecHook::CodecHook(const comm::Communicator& data, const cc::CodecOptions& options, Duration timeout)
    : comm_(data.split(0, data.rank())), codec_(cc::make_codec(options)), timeout_(timeout) {
  if (!codec_) fail<ConfigError>("codec hook: parallel.codec = none needs no hook");
  thread_ = std::thread([this] { loop(); });
}

CodecHook::~CodecHook() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // tasks left run first: none may write into freed buckets
}

void CodecHook::loop() {
  name_this_thread("braid-codec");
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

comm::Work CodecHook::run(comm::Communicator&, const GradBucket& bucket, bool) {
  comm::Work work(fmt::format("rank {} codec {} bucket {}", comm_.rank(), codec_->name(), bucket.index));
  {
    std::lock_guard lock(mu_);
    tasks_.push_back([this, bucket, work] {
      try {
        average(bucket);
        work.complete();
      } catch (...) {
        work.complete(std::current_exception());
      }
    });
  }
  cv_.notify_all();
  return work;
}

void CodecHook::average(const GradBucket& bucket) {
  const Tensor& flat = bucket.flat;
  // A bucket on a device stays there: the codec's device kernels and the
  // communicator's device collectives (NCCL or its staging) serve it.
  const comm::BufferRef buf(flat.raw_data(), static_cast<size_t>(flat.numel()), flat.dtype(), flat.device());
  if (flat.dtype() != DType::f32) {  // the codecs read f32; other buckets travel plain
    comm_.allreduce(buf, {.op = comm::Op::avg, .timeout = timeout_}).wait(Deadline::after(timeout_));
    return;
  }
  std::vector<cc::Matrix> layout;
  for (const Shape& s : bucket.shapes) {
    const auto n = static_cast<size_t>(numel(s));
    const size_t rows = s.empty() ? 1 : static_cast<size_t>(s[0]);
    layout.push_back({rows, rows ? n / rows : 0});
  }
  cc::BucketState* state;
  {
    std::lock_guard lock(mu_);
    auto [it, fresh] = states_.try_emplace(bucket.index);
    state = &it->second;
    if (fresh) {
      // Distinct per rank and bucket (QSGD's rounding must differ across ranks).
      state->stream = (static_cast<uint64_t>(comm_.rank()) << 32) | bucket.index;
      const std::string prefix = fmt::format("b{}.", bucket.index);
      for (const auto& [name, t] : pending_) {
        if (!name.starts_with(prefix)) continue;
        const std::string key = name.substr(prefix.size());
        const Tensor c = t.to(Device::cpu).to(DType::f32).contiguous();
        if (key == "steps") {
          state->steps = static_cast<int64_t>(c.data<float>()[0]);
        } else if (!flat.device().is_cpu()) {  // error memory lives beside the bucket
          const auto n = static_cast<size_t>(c.numel());
          cc::DeviceVector& v = state->device_tensor(key, n, flat.device());
          cc::device_codec_kernels(v.device).copy(v.get(), v.device, c.raw_data(), Device::cpu, n * sizeof(float));
        } else {
          state->tensors[key].assign(c.data<float>(), c.data<float>() + c.numel());
        }
      }
    }
  }
  cc::CodecStats stats;
  if (flat.device().is_cpu()) {
    codec_->average(comm_, {flat.data<float>(), static_cast<size_t>(flat.numel())}, layout, *state,
                    {.timeout = timeout_}, stats);
  } else {
    codec_->average_on_device(comm_, buf, layout, *state, {.timeout = timeout_}, stats);
  }
  std::lock_guard lock(mu_);
  stats_.add(stats);
}

nlohmann::json CodecHook::take_stats() {
  std::lock_guard lock(mu_);
  nlohmann::json j = stats_.to_json();
  j["codec"] = codec_->name();
  stats_ = {};
  return j;
}

// Called between steps (no task running). "steps" is stored as f32 (the
// checkpoint's tensors are f32): exact up to 2^24 = 16.7 M steps.
nn::NamedTensors CodecHook::state_dict() const {
  std::lock_guard lock(mu_);
  nn::NamedTensors out;
  for (const auto& [index, s] : states_) {
    Tensor steps = Tensor::empty({1}, DType::f32);
    steps.data<float>()[0] = static_cast<float>(s.steps);
    out.emplace_back(fmt::format("b{}.steps", index), steps);
    for (const auto& [name, v] : s.tensors) {
      Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::f32);
      if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(float));
      out.emplace_back(fmt::format("b{}.{}", index, name), t);
    }
    for (const auto& [name, v] : s.on_device) {  // checkpoints hold host tensors
      Tensor t = Tensor::empty({static_cast<int64_t>(v.size)}, DType::f32);
      if (v.size) {
        cc::device_codec_kernels(v.device).copy(t.raw_data(), Device::cpu, v.get(), v.device, v.size * sizeof(float));
      }
      out.emplace_back(fmt::format("b{}.{}", index, name), t);
    }
  }
  return out;
}

void CodecHook::load_state_dict(const nn::NamedTensors& state) {
  std::lock_guard lock(mu_);
  pending_ = state;
  states_.clear();  // rebuilt from pending_ at each bucket's next run
}

}  // namespace braid::parallel
