// Fuzzes the safetensors reader (base/safetensors.h): the header length, the
// JSON header (dtypes, shapes, offsets, metadata, braid.crc32) and the data
// buffer, as checkpoints and parameter-server shard files are read.
//
// Checked besides the contract (fuzz.h): every tensor read back holds exactly
// the bytes its dtype and shape call for.
#include "braid/base/safetensors.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace st = braid::safetensors;
  braid::fuzz::refused_or_ok([&] {
    const st::File f = st::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz.safetensors");
    for (const auto& [name, t] : f.tensors) {
      uint64_t n = st::dtype_size(t.dtype);
      for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);  // fits: the reader checked it
      if (n != t.data.size()) __builtin_trap();
    }
  });
  return 0;
}
