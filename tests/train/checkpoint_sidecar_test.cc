// A checkpoint sidecar read as bytes from outside (train/checkpoint_sidecar.h):
// each field braid reads is checked once, as it is parsed, so a malformed one
// is an IoError naming the file and the field. Before, a wrong type surfaced
// as a JSON library exception wherever the field was read (resume, resharding,
// `braid inspect checkpoint`), and a shard spec's whole shape was allocated as
// written. fuzz/checkpoint_sidecar.cc looks for more.
#include <gtest/gtest.h>

#include "braid/train/checkpoint_sidecar.h"
#include "tests/testing/error_message.h"

namespace braid::train {
namespace {

using nlohmann::json;

json valid() {
  return json::parse(R"({"step": 40, "epoch": 1, "batch": 12, "tensors_crc32": 3735928559,
    "rng": {"seed": 42, "stream": 0, "offset": 128}, "optimizer": {"name": "sgd", "steps": 40},
    "config": {"parallel": {"data": 2}},
    "extra": {"run_id": "r1", "params": ["w"], "zero": {"stage": 1, "data_world": 2},
              "shard": {"mesh": "data 2", "params": ["w"],
                        "specs": {"w": {"dim": 0, "full_shape": [8, 4], "offset": 0, "blocks": 1}}}}})");
}

std::string refusal(const json& side) {
  return test::message_of<IoError>([&] { parse_checkpoint_sidecar(side.dump(), "ck.json"); });
}

TEST(CheckpointSidecar, AValidSidecarParses) {
  EXPECT_EQ(parse_checkpoint_sidecar(valid().dump(), "ck.json"), valid());
  EXPECT_NE(test::message_of<IoError>([] { parse_checkpoint_sidecar("{\"step\": ", "ck.json"); })
                .find("checkpoint sidecar ck.json is corrupt"),
            std::string::npos);
}

TEST(CheckpointSidecar, FieldsOfTheWrongTypeNameTheField) {
  json s = valid();
  s["config"]["parallel"] = 3;  // checkpoint_info read .value("data") of it: json::type_error
  EXPECT_NE(refusal(s).find("ck.json is malformed: config.parallel should be an object, found 3"), std::string::npos);
  s = valid();
  s["extra"]["zero"]["stage"] = "one";
  EXPECT_NE(refusal(s).find("extra.zero.stage should be an integer in [0, 3]"), std::string::npos);
  s = valid();
  s["rng"]["seed"] = -1;  // read as uint64: wrapped silently
  EXPECT_NE(refusal(s).find("rng.seed should be an integer in [0, 18446744073709551615]"), std::string::npos);
  s = valid();
  s.erase("tensors_crc32");
  EXPECT_NE(refusal(s).find("it lacks tensors_crc32"), std::string::npos);
  s = valid();
  s["extra"]["shard"]["params"] = json::array({"w", 7});
  EXPECT_NE(refusal(s).find("extra.shard.params should be an array of strings"), std::string::npos);
  EXPECT_NE(refusal(json::array()).find("the sidecar should be a JSON object"), std::string::npos);
}

// Merging shards allocated the spec's whole shape as written.
TEST(CheckpointSidecar, ShardSpecsWithHugeOrOverflowingShapesAreRefused) {
  json s = valid();
  s["extra"]["shard"]["specs"]["w"]["full_shape"] = json::array({1 << 30, 1 << 30});
  EXPECT_NE(refusal(s).find("specs.w.full_shape should be a shape of at most 2^40 elements"), std::string::npos);
  s["extra"]["shard"]["specs"]["w"]["full_shape"] = json::array({uint64_t{1} << 63, 2});
  EXPECT_NE(refusal(s).find("specs.w.full_shape should be sizes in [0, 2^40]"), std::string::npos);
  s["extra"]["shard"]["specs"]["w"]["full_shape"] = json::array({0, uint64_t{1} << 40, uint64_t{1} << 40});
  EXPECT_NO_THROW(parse_checkpoint_sidecar(s.dump(), "ck.json"));  // zero elements
  s["extra"]["shard"]["specs"]["w"]["dim"] = 99;
  EXPECT_NE(refusal(s).find("specs.w.dim should be an integer in [-1, 63]"), std::string::npos);
}

}  // namespace
}  // namespace braid::train
