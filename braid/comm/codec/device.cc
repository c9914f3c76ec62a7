// The codecs' device path: the kernels' registry, message sizes, and the
// average of a bucket in device memory (codec.h, device.h).
#include "braid/comm/codec/device.h"

#include <array>
#include <atomic>
#include <bit>
#include <chrono>

#include "braid/base/error.h"
#include "braid/comm/codec/codec.h"
#include "braid/comm/codec/wire.h"

namespace braid::comm::codec {

namespace {

using DeviceClock = std::chrono::steady_clock;

std::array<std::atomic<DeviceCodecKernels*>, 3>& codec_kernel_registry() {
  static std::array<std::atomic<DeviceCodecKernels*>, 3> kernels{};
  return kernels;
}

double elapsed_s(DeviceClock::time_point a, DeviceClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void set_device_codec_kernels(DeviceType type, DeviceCodecKernels* kernels) {
  codec_kernel_registry()[static_cast<size_t>(type)].store(kernels);
}

DeviceCodecKernels& device_codec_kernels(Device device) {
  DeviceCodecKernels* k = codec_kernel_registry()[static_cast<size_t>(device.type)].load();
  if (k == nullptr) fail<ValueError>("codec: no codec kernels for buffers on {} in this build", name(device));
  return *k;
}

int qsgd_field_bits(uint32_t s) { return 1 + std::bit_width(s); }

size_t qsgd_message_bytes(size_t n, uint32_t s, size_t chunk) {
  return 16 + chunk_count(n, chunk) * sizeof(float) + packed_bytes(n, qsgd_field_bits(s));
}

size_t onebit_message_bytes(size_t n, size_t chunk) {
  return 16 + 2 * chunk_count(n, chunk) * sizeof(float) + packed_bytes(n, 1);
}

size_t topk_message_bytes(size_t k) { return 16 + k * (sizeof(uint32_t) + sizeof(float)); }

DeviceVector& BucketState::device_tensor(const std::string& name, size_t n, Device device) {
  DeviceVector& v = on_device[name];
  if (v.size != n || v.device != device || !v.data) {
    v = {.data = device_codec_kernels(device).allocate(device, n * sizeof(float)), .size = n, .device = device};
  }
  return v;
}

void Codec::average_on_device(Communicator& comm, BufferRef grad, std::span<const Matrix> layout, BucketState& state,
                              const AverageOptions& o, CodecStats& stats) {
  if (grad.device.is_cpu() || grad.dtype != DType::f32) {
    fail<ValueError>("codec {}: the device average takes f32 device buffers, got {} on {}", o_.name,
                     braid::name(grad.dtype), braid::name(grad.device));
  }
  if (plain(state, grad.count)) {
    wait(comm.allreduce(grad, {.op = Op::avg, .timeout = o.timeout}), comm, "plain all-reduce", state, o);
    stats.raw_bytes += grad.bytes();
    stats.wire_bytes += grad.bytes();
    stats.calls++;
  } else {
    if (device_message_bytes(1) == 0) {  // a codec with kernels sends bytes for one value
      fail<ValueError>("codec {} has no device kernels: buckets on {} cannot use it", o_.name,
                       braid::name(grad.device));
    }
    combine_on_device(comm, grad, layout, state, o, stats);
  }
  state.steps++;
}

void Codec::combine_on_device(Communicator& comm, BufferRef grad, std::span<const Matrix>, BucketState& state,
                              const AverageOptions& o, CodecStats& stats) {
  const Device dev = grad.device;
  DeviceCodecKernels& k = device_codec_kernels(dev);
  const size_t n = grad.count, bytes = device_message_bytes(n), w = static_cast<size_t>(comm.size());
  auto* g = reinterpret_cast<float*>(grad.data);
  // Host times below are the launches' (the kernels run in stream order).
  const auto t0 = DeviceClock::now();
  const std::shared_ptr<std::byte> mine = k.allocate(dev, bytes), all = k.allocate(dev, bytes * w);
  encode_on_device(k, dev, g, n, state, mine.get());
  const auto t1 = DeviceClock::now();
  wait(comm.allgather(BufferRef(mine.get(), bytes, DType::u8, dev), BufferRef(all.get(), bytes * w, DType::u8, dev),
                      {.timeout = o.timeout}),
       comm, "allgather of messages", state, o);
  const auto t2 = DeviceClock::now();
  k.zero(dev, g, n);
  for (size_t r = 0; r < w; ++r) decode_add_on_device(k, dev, all.get() + r * bytes, n, g);
  k.scale(dev, g, n, 1.0f / static_cast<float>(w));
  const auto t3 = DeviceClock::now();
  stats.raw_bytes += grad.bytes();
  stats.wire_bytes += bytes;
  stats.encode_s += elapsed_s(t0, t1);
  stats.decode_s += elapsed_s(t2, t3);
  stats.calls++;
}

float* feedback_input(DeviceCodecKernels& k, Device d, const float* grad, size_t n, BucketState& state,
                      bool error_feedback, std::shared_ptr<std::byte>& scratch) {
  float* x;
  if (error_feedback) {
    x = state.device_tensor("memory", n, d).get();
  } else {
    scratch = k.allocate(d, n * sizeof(float));
    x = reinterpret_cast<float*>(scratch.get());
  }
  k.add(d, x, grad, n);
  return x;
}

}  // namespace braid::comm::codec
