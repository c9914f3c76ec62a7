// Fuzzes the TOML config loader (train/config.h) against braid's whole schema
// (every key, type, range and choice), then the same document through the
// JSON round trip a checkpoint's config takes (to_json, load_json).
#include "braid/train/config.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using braid::train::Config;
  static const braid::train::Schema schema = braid::train::braid_schema();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  braid::fuzz::refused_or_ok([&] {
    Config c(schema);
    c.load_toml(text, "fuzz.toml");
    Config back(schema);
    back.load_json(c.to_json(), "fuzz.json");
    if (!back.differences(c).empty()) __builtin_trap();  // what loaded must round-trip
  });
  return 0;
}
