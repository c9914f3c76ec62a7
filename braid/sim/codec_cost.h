// What a gradient codec costs and saves on one bucket, measured on this
// machine by running braid's own codec (comm/codec) on a bucket of that size:
// the simulator charges the encode and decode time on the communication
// stream and sends the encoded bytes.
#pragma once

#include <cstddef>
#include <string>

#include "braid/comm/codec/codec.h"

namespace braid::sim {

struct CodecCost {
  std::string name = "none";
  double raw_bytes = 0;    // the f32 bucket
  double wire_bytes = 0;   // one rank's message
  double encode = 0;       // seconds per bucket
  double decode = 0;       // seconds to decode (and add) one message
  // The codec averages in the encoded domain with all-reduces (fp16, bf16,
  // PowerSGD's factors); otherwise every rank's message is all-gathered and
  // each rank decodes all of them.
  bool reduces_encoded = false;
};

// Median of a few encode/decode calls of `options`' codec on a bucket of
// `values` f32 gradients (past its warm-up steps). name "none": raw = wire.
CodecCost measure_codec(const comm::codec::CodecOptions& options, size_t values);

}  // namespace braid::sim
