#include "braid/sim/codec_cost.h"

#include <chrono>
#include <random>
#include <vector>

#include "braid/base/deadline.h"
#include "braid/base/median.h"

namespace braid::sim {

CodecCost measure_codec(const comm::codec::CodecOptions& options, size_t values) {
  CodecCost c{.name = options.name, .raw_bytes = 4.0 * static_cast<double>(values),
              .wire_bytes = 4.0 * static_cast<double>(values)};
  auto codec = comm::codec::make_codec(options);
  if (!codec || values == 0) return c;
  c.reduces_encoded = options.name == "fp16" || options.name == "bf16" || options.name == "powersgd";
  std::vector<float> grad(values), out(values);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0, 1);
  for (float& g : grad) g = normal(rng);
  // A bucket is laid out as one matrix as square as its size allows, so
  // PowerSGD compresses it as it would a layer's weight.
  size_t rows = 1;
  while (rows * rows < values) rows *= 2;
  while (rows > 1 && values % rows != 0) rows /= 2;
  const std::vector<comm::codec::Matrix> layout{{rows, values / rows}};
  comm::codec::BucketState state;
  state.steps = options.warmup_steps;
  std::vector<std::byte> message;
  std::vector<double> enc, dec;
  for (int i = 0; i < 5; ++i) {
    auto t0 = Clock::now();
    codec->encode(grad, layout, state, message);
    enc.push_back(seconds_since(t0));
    t0 = Clock::now();
    codec->decode_add(message, layout, out);
    dec.push_back(seconds_since(t0));
  }
  c.wire_bytes = static_cast<double>(message.size());
  c.encode = upper_median(enc);
  c.decode = upper_median(dec);
  return c;
}

}  // namespace braid::sim
