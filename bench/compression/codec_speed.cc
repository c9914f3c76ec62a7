// Encode and decode cost of each gradient codec, alone on one core:
//   build/bin/codec_speed [MIB [CODEC ...]]
// prints, per codec, the wire ratio and milliseconds per MiB of f32 gradient
// to encode one bucket and to decode (and add) one message, medians of five
// calls on a bucket of MIB MiB (default 1) of normal values (sim::measure_codec,
// the figures `braid sim` charges). A rank of an all-gathering codec (qsgd,
// onebit, topk) decodes every rank's message, so its step pays
// encode + W x decode. The settings are bench/compression/compression_bench.py's.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "braid/sim/codec_cost.h"

using braid::comm::codec::CodecOptions;

namespace {

CodecOptions bench_options(const std::string& name) {
  CodecOptions o;
  o.name = name;
  if (name == "qsgd") o.qsgd_levels = 15;
  if (name == "topk") o.topk_ratio = 0.05;
  if (name == "powersgd") o.powersgd_rank = 4;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const double mib = argc > 1 ? std::atof(argv[1]) : 1.0;
  std::vector<std::string> names;
  for (int i = 2; i < argc; ++i) names.emplace_back(argv[i]);
  if (names.empty()) names = {"fp16", "bf16", "qsgd", "onebit", "topk", "powersgd"};
  const auto values = static_cast<size_t>(mib * (1 << 20) / 4);
  std::printf("%-9s %8s %14s %14s   (%.2f MiB bucket)\n", "codec", "ratio", "encode ms/MiB", "decode ms/MiB", mib);
  for (const std::string& name : names) {
    const auto c = braid::sim::measure_codec(bench_options(name), values);
    std::printf("%-9s %7.1fx %14.2f %14.2f\n", name.c_str(), c.raw_bytes / c.wire_bytes, c.encode * 1e3 / mib,
                c.decode * 1e3 / mib);
  }
}
