// Codecs on device buffers (docs/gpu.md, "Codecs, averaging and SyncBN on the
// device"): the kernels a device backend provides so that a bucket in device
// memory is encoded, exchanged and decoded where it lives. braid/cuda installs
// CUDA's (braid/cuda/codec_kernels.h); the comm layer cannot include it, so
// the codecs reach them through this interface, as collectives on device
// buffers reach NCCL through DeviceCollectives.
//
// Every pointer below is device memory of the call's device. Messages keep the
// host codecs' byte layout (a device message's first bytes are the host
// encoder's message, bit for bit); top-k's, whose length depends on the
// values, is padded to its largest size so every rank's has the same length
// and an all-gather (NCCL has no allgatherv) carries them. A kernel reads a
// message's sizes from the caller (every rank runs the same codec options),
// never from the message, so a peer's bytes cannot steer a read or a write
// out of the buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "braid/tensor/device.h"
#include "braid/tensor/dtype.h"

namespace braid::comm::codec {

// The QSGD key of a call: the host encoder's Philox key and stream (qsgd.cc).
struct QsgdDraw {
  uint64_t key = 0, stream = 0;
};

class DeviceCodecKernels {
 public:
  virtual ~DeviceCodecKernels() = default;

  // `bytes` of zeroed memory on `device`, given back (in stream order) when
  // the last owner lets go.
  virtual std::shared_ptr<std::byte> allocate(Device device, size_t bytes) = 0;
  // Bytes between host and device memory (either way; a copy to the host has
  // finished on return). Only checkpoints use it, never a step.
  virtual void copy(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) = 0;

  // x[i] += y[i]; x[i] *= factor; x[i] = 0.
  virtual void add(Device d, float* x, const float* y, size_t n) = 0;
  virtual void scale(Device d, float* x, size_t n, float factor) = 0;
  virtual void zero(Device d, float* x, size_t n) = 0;

  // fp16/bf16: half[i] = narrow(widen(narrow(grad[i])) / world), as the host
  // combine's `to(half).div_(world)`; out[i] = widen(half[i]).
  virtual void cast_divide(Device d, const float* grad, void* half, DType half_type, size_t n, float world) = 0;
  virtual void widen(Device d, const void* half, DType half_type, float* out, size_t n) = 0;

  // QSGD with s levels per sign over chunks of `chunk` values.
  virtual void qsgd_encode(Device d, const float* grad, size_t n, uint32_t s, size_t chunk, QsgdDraw draw,
                           std::byte* message) = 0;
  virtual void qsgd_decode_add(Device d, const std::byte* message, size_t n, uint32_t s, size_t chunk,
                               float* out) = 0;

  // 1-bit: x holds grad (+ memory) and, with keep_error, becomes the new memory.
  virtual void onebit_encode(Device d, float* x, size_t n, size_t chunk, bool keep_error, std::byte* message) = 0;
  virtual void onebit_decode_add(Device d, const std::byte* message, size_t n, size_t chunk, float* out) = 0;

  // Top-k of |x| (k > 0); x holds grad (+ memory) and, with keep_error, loses
  // the entries sent. The message holds at most k pairs.
  virtual void topk_encode(Device d, float* x, size_t n, size_t k, bool keep_error, std::byte* message) = 0;
  virtual void topk_decode_add(Device d, const std::byte* message, size_t n, size_t k, float* out) = 0;
};

struct BucketState;
// What a codec with error feedback encodes on the device: grad + the bucket's
// memory, summed in the memory itself (the encode kernels leave it holding
// what was not sent); without error feedback, grad copied into zeroed scratch
// memory that `scratch` keeps alive while the encode is queued.
float* feedback_input(DeviceCodecKernels& k, Device d, const float* grad, size_t n, BucketState& state,
                      bool error_feedback, std::shared_ptr<std::byte>& scratch);

// Installs the kernels for buffers on devices of `type` (process-wide).
void set_device_codec_kernels(DeviceType type, DeviceCodecKernels* kernels);
// The kernels for `device`; ValueError naming the device where none are installed.
DeviceCodecKernels& device_codec_kernels(Device device);

// Message bytes of a bucket of n values (the device layout: top-k's padded to k pairs).
size_t qsgd_message_bytes(size_t n, uint32_t s, size_t chunk);
size_t onebit_message_bytes(size_t n, size_t chunk);
size_t topk_message_bytes(size_t k);
// QSGD's width of a (level, sign) field: 1 + bit_width(s).
int qsgd_field_bits(uint32_t s);

}  // namespace braid::comm::codec
