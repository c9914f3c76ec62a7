// Fuzzes the IDX reader (data/idx.h; MNIST's format): the magic, element
// type, dimensions and payload, in memory as read_idx() sees a file after
// gunzip.
//
// Checked besides the contract (fuzz.h): the values read are as many as the
// dimensions multiply to.
#include "braid/data/idx.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  const std::vector<std::byte> bytes(p, p + size);
  braid::fuzz::refused_or_ok([&] {
    const braid::data::IdxArray a = braid::data::parse_idx(bytes, "fuzz.idx");
    uint64_t n = 1;
    for (int64_t d : a.dims) n *= static_cast<uint64_t>(d);
    if (n != a.values.size()) __builtin_trap();
  });
  return 0;
}
