// Fuzzes a training checkpoint's JSON sidecar (train/checkpoint_sidecar.h),
// as resume, resharding and `braid inspect checkpoint` read it.
//
// Checked besides the contract (fuzz.h): a sidecar that is accepted can be
// read the way braid's readers read it (checkpoint.cc, checkpoint_info.cc,
// checkpoint_shards.cc) without a JSON exception.
#include "braid/train/checkpoint_sidecar.h"
#include "fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  braid::fuzz::refused_or_ok([&] {
    const json side = braid::train::parse_checkpoint_sidecar(text, "fuzz.json");
    (void)side.at("tensors_crc32").get<uint32_t>();
    (void)side.at("step").get<int64_t>(), (void)side.at("epoch").get<int64_t>(), (void)side.at("batch").get<int64_t>();
    const json& r = side.at("rng");
    (void)r.at("seed").get<uint64_t>(), (void)r.at("stream").get<uint64_t>(), (void)r.at("offset").get<uint64_t>();
    const json& opt = side.at("optimizer");
    (void)opt.value("name", std::string()), (void)opt.value("steps", int64_t{0});
    const json config = side.value("config", json::object());
    (void)config.value("parallel", json::object()).value("data", int64_t{0});
    const json extra = side.value("extra", json::object());
    (void)extra.value("run_id", std::string());
    (void)extra.value("params", std::vector<std::string>{});
    (void)extra.value("zero", json::object()).value("stage", 0);
    const json shard = extra.value("shard", json::object());
    (void)shard.value("mesh", std::string());
    (void)shard.value("params", std::vector<std::string>{});
    const json specs = shard.value("specs", json::object());  // named: items() of a temporary would dangle
    for (const auto& [name, s] : specs.items()) {
      (void)s.at("dim").get<int>(), (void)s.at("offset").get<int64_t>(), (void)s.value("blocks", 1);
      (void)s.at("full_shape").get<std::vector<int64_t>>();
    }
  });
  return 0;
}
