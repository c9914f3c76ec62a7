// Gradient codecs: fewer bytes per gradient on the wire (docs/compression.md).
//
// A codec sees one bucket of f32 gradients at a time (its tensors laid out as
// `Matrix`es) and offers two paths:
//   encode / decode_add   a message that decodes alone: what a parameter-server
//                         push carries, and the generic all-reduce below
//   average               the data axis's average of every rank's bucket,
//                         in place. The generic one all-gathers every rank's
//                         message (allgatherv: messages may differ in size)
//                         and decodes them in rank order, so every rank ends
//                         with bitwise the same result. Codecs whose encoding
//                         is linear override it with a reduction in the
//                         encoded domain (fp16/bf16: an all-reduce of halves;
//                         PowerSGD: all-reduces of its factors).
// What a codec remembers between steps (error-feedback memory, PowerSGD's Q,
// the step count) lives in a BucketState the caller owns, one per bucket, so
// checkpoints can save it and one codec serves every bucket.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "braid/comm/communicator.h"

namespace braid::comm::codec {

// One tensor of a bucket as a matrix: shape [d0, d1, ...] is [d0, d1 * ...],
// a vector [n] is [n, 1] (the view PyTorch's PowerSGD takes).
struct Matrix {
  size_t rows = 0, cols = 0;
  size_t size() const { return rows * cols; }
};
// A bucket of `n` values seen as one vector.
inline std::vector<Matrix> flat_layout(size_t n) { return {Matrix{n, 1}}; }

struct CodecOptions {
  std::string name = "none";        // none, fp16, bf16, qsgd, onebit, topk, powersgd
  int64_t qsgd_levels = 127;        // s: levels per sign; 8 bits per value with the sign
  int64_t qsgd_chunk = 512;         // values per norm (the variance bound holds per chunk)
  int64_t onebit_chunk = 256;       // values per pair of scales
  double topk_ratio = 0.01;         // fraction of a bucket's values sent
  int64_t powersgd_rank = 2;        // r
  double powersgd_min_rate = 2;     // a matrix is compressed only when it shrinks more than this
  double powersgd_epsilon = 0;      // added to column norms in the orthogonalisation
  int64_t warmup_steps = 0;         // a bucket's first calls are plain all-reduces
  int64_t min_elements = 0;         // smaller buckets are plain all-reduces
  bool error_feedback = true;       // onebit, topk, powersgd: keep what was not sent
  uint64_t seed = 0;                // QSGD's rounding, PowerSGD's first Q

  nlohmann::json to_json() const;
  static CodecOptions from_json(const nlohmann::json& j);
  // ConfigError naming the codec.* key that is out of range.
  void validate() const;
};

class DeviceCodecKernels;  // device.h

// A vector of floats a codec keeps in device memory (error feedback of a
// bucket on a GPU).
struct DeviceVector {
  std::shared_ptr<std::byte> data;
  size_t size = 0;  // floats
  Device device = Device::cpu;
  float* get() const { return reinterpret_cast<float*>(data.get()); }
};

// What one codec remembers about one bucket between steps.
struct BucketState {
  int64_t steps = 0;     // calls so far (warm-up; the stream of QSGD's rounding)
  uint64_t stream = 0;   // distinct per rank and bucket: random numbers never repeat across them
  // "memory": error feedback (what was not sent yet); "q": PowerSGD's warm start.
  std::map<std::string, std::vector<float>> tensors;
  // The named vector, created as n zeros on first use.
  std::vector<float>& tensor(const std::string& name, size_t n);
  // The same for a bucket on a device: "memory" where the bucket lives.
  std::map<std::string, DeviceVector> on_device;
  DeviceVector& device_tensor(const std::string& name, size_t n, Device device);
};

// Bytes and seconds of the calls since the counters were last taken.
struct CodecStats {
  uint64_t raw_bytes = 0;    // f32 gradient bytes that went in
  uint64_t wire_bytes = 0;   // bytes this rank sent as its contribution (before the collective's own copies)
  double encode_s = 0, decode_s = 0;
  int64_t calls = 0;
  void add(const CodecStats& o);
  nlohmann::json to_json() const;
};

struct AverageOptions {
  Duration timeout = std::chrono::seconds(300);  // per collective
};

class Codec {
 public:
  explicit Codec(CodecOptions options) : o_(std::move(options)) {}
  virtual ~Codec() = default;
  Codec(const Codec&) = delete;
  Codec& operator=(const Codec&) = delete;

  const CodecOptions& options() const { return o_; }
  std::string name() const { return o_.name; }

  // `grad` (plus the error memory, which keeps what the message leaves out)
  // as a message that decodes alone; `layout` covers grad.size() values.
  virtual void encode(std::span<const float> grad, std::span<const Matrix> layout, BucketState& state,
                      std::vector<std::byte>& message) = 0;
  // out += the message's values (out.size() values in `layout`).
  virtual void decode_add(std::span<const std::byte> message, std::span<const Matrix> layout,
                          std::span<float> out) const = 0;

  // True when a call on `values` values goes uncompressed: a bucket's (or a
  // parameter-server range's) first warmup_steps calls, and buckets below
  // min_elements.
  bool plain(const BucketState& state, size_t values) const {
    return state.steps < o_.warmup_steps || values < static_cast<size_t>(o_.min_elements);
  }
  // The data axis's average of every rank's `grad`, in place, bitwise equal
  // on every rank. A plain() call is a plain all-reduce; otherwise combine().
  void average(Communicator& comm, std::span<float> grad, std::span<const Matrix> layout, BucketState& state,
               const AverageOptions& o, CodecStats& stats);
  // The same average of f32 `grad` in device memory (grad.device): encode,
  // collectives and decode run on the device (device.h), bitwise the host
  // average's for the same collectives' sums; the error memory stays there
  // (state.on_device). ValueError naming the codec where it has no device kernels.
  void average_on_device(Communicator& comm, BufferRef grad, std::span<const Matrix> layout, BucketState& state,
                         const AverageOptions& o, CodecStats& stats);
  // Bytes of a device message for n values; 0 for one value where the codec
  // has no device kernels (the two below are then never called).
  virtual size_t device_message_bytes(size_t) const { return 0; }
  // encode and decode_add on the device: `grad` and `out` hold n f32 values
  // in device memory, `message` device_message_bytes(n) bytes there.
  virtual void encode_on_device(DeviceCodecKernels&, Device, const float* /*grad*/, size_t /*n*/, BucketState&,
                                std::byte* /*message*/) {}
  virtual void decode_add_on_device(DeviceCodecKernels&, Device, const std::byte* /*message*/, size_t /*n*/,
                                    float* /*out*/) const {}

 protected:
  // The compressed average; default: all-gather every rank's message and
  // decode them in rank order.
  virtual void combine(Communicator& comm, std::span<float> grad, std::span<const Matrix> layout, BucketState& state,
                       const AverageOptions& o, CodecStats& stats);
  // The device average (device_message_bytes() > 0): default, as combine(),
  // an all-gather of every rank's message (device messages have one length)
  // and their decoding in rank order.
  virtual void combine_on_device(Communicator& comm, BufferRef grad, std::span<const Matrix> layout,
                                 BucketState& state, const AverageOptions& o, CodecStats& stats);
  // Waits for a collective the codec started; TimeoutError naming rank and step.
  void wait(const Work& w, const Communicator& comm, const char* what, const BucketState& state,
            const AverageOptions& o) const;

  CodecOptions o_;
};

// null for "none"; ConfigError for an unknown name or a bad option.
std::unique_ptr<Codec> make_codec(const CodecOptions& options);

// The codecs, side by side (cast.cc, qsgd.cc, onebit.cc, topk.cc, powersgd.cc).
std::unique_ptr<Codec> make_cast_codec(const CodecOptions& options, DType half);
std::unique_ptr<Codec> make_qsgd_codec(const CodecOptions& options);
std::unique_ptr<Codec> make_onebit_codec(const CodecOptions& options);
std::unique_ptr<Codec> make_topk_codec(const CodecOptions& options);
std::unique_ptr<Codec> make_powersgd_codec(const CodecOptions& options);

}  // namespace braid::comm::codec
