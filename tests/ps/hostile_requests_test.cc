// Hostile requests to a parameter server (docs/reliability.md, "Hostile
// bytes"): headers and payloads a worker could send that made the server
// overflow a buffer, allocate what the bytes asked, or run into undefined
// behaviour, each now refused with a ValueError naming the worker. The server
// is driven as Server::Impl::serve() drives it (expected_bytes, then handle),
// without a transport; fuzz/ps_protocol.cc does the same with random bytes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>

#include "braid/base/safetensors.h"
#include "braid/ps/server_impl.h"
#include "tests/testing/error_message.h"

namespace braid::ps {
namespace {

class NoTransport final : public comm::Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 3; }
  std::string name() const override { return "none"; }
  comm::Work send(int, uint64_t, std::span<const std::byte>) override { throw Error("unused"); }
  comm::Work recv(int, uint64_t, std::span<std::byte>) override { throw Error("unused"); }
};

Bytes text(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return Bytes(p, p + s.size());
}

struct Fixture {
  NoTransport t;
  Server::Impl server;
  ReusedBuffer out;

  explicit Fixture(ServerOptions o = {.servers = 1, .workers = 2, .max_shard_bytes = 1 << 20, .max_message = 1 << 16})
      : server(t, o) {}

  // One request as serve() handles it: the payload size is checked first.
  void request(int worker, RequestHeader h, const Bytes& payload) {
    h.bytes = payload.size();
    if (server.expected_bytes(worker, h) != payload.size()) throw Error("test: payload of the wrong size");
    ReplyHeader reply;
    server.handle(worker, h, payload, reply, out);
  }
  void hello(int64_t dense_total, const std::string& consistency = "asp", const std::string& codec = "none") {
    PsConfig c;
    c.consistency = parse_consistency(consistency);
    c.codec.name = codec;
    const nlohmann::json j = {{"config", c.to_json()}, {"dense_total", dense_total}};
    for (int w = 0; w < 2; ++w) request(w, {.op = Op::hello}, text(j.dump()));
  }
};

std::string refusal(const std::function<void()>& fn) { return test::message_of<ValueError>(fn); }

// With a codec, init_dense accepted an encoded push's size (up to 2x the
// range + 4 KiB) but copies raw floats into the range: a heap overflow.
TEST(HostilePsRequests, InitDenseLargerThanTheRangeIsRefusedWithACodec) {
  Fixture f;
  f.hello(8, "asp", "topk");
  const RequestHeader h{.op = Op::init_dense, .count = 8, .bytes = 64};
  EXPECT_NE(refusal([&] { f.server.expected_bytes(0, h); }).find("init_dense with 64 bytes for 8 values"),
            std::string::npos);
}

// count * 4 wrapped: a count of 2^62 + 8 passed as 8 values, and the codec
// path then allocated 2^62 floats.
TEST(HostilePsRequests, CountThatWrapsToTheRangeSizeIsRefused) {
  Fixture f;
  f.hello(8, "asp", "topk");
  const RequestHeader h{.op = Op::push_dense, .count = (uint64_t{1} << 62) + 8, .bytes = 40};
  EXPECT_NE(refusal([&] { f.server.expected_bytes(0, h); }).find("push_dense with 40 bytes"), std::string::npos);
}

// An encoded push where the job has no codec, and flags no push defines.
TEST(HostilePsRequests, EncodedPushWithoutACodecAndUnknownFlagsAreRefused) {
  Fixture f;
  f.hello(8);
  const RequestHeader encoded{.op = Op::push_dense, .count = 8, .bytes = 32, .flags = kEncodedPush};
  EXPECT_NE(refusal([&] { f.server.expected_bytes(0, encoded); }).find("push_dense with 32 bytes"), std::string::npos);
  Fixture g;
  g.hello(8, "asp", "topk");
  const RequestHeader unknown{.op = Op::push_dense, .count = 8, .bytes = 32, .flags = 2};
  EXPECT_NE(refusal([&] { g.server.expected_bytes(0, unknown); }).find("push_dense with 32 bytes"), std::string::npos);
  const RequestHeader raw{.op = Op::push_dense, .count = 8, .bytes = 32};  // a warm-up push: raw f32
  EXPECT_EQ(g.server.expected_bytes(0, raw), 32u);
}

// The hello's model size sized the shard: a negative one became a huge
// size_t, a huge one was allocated as asked.
TEST(HostilePsRequests, HelloWithANegativeOrHugeModelIsRefused) {
  Fixture f;
  EXPECT_NE(refusal([&] { f.hello(-5); }).find("a hello for -5 dense values"), std::string::npos);
  Fixture g;
  EXPECT_NE(refusal([&] { g.hello(int64_t{1} << 40); }).find("past the server's limit of 1048576"), std::string::npos);
  Fixture h;
  EXPECT_NE(refusal([&] { h.request(0, {.op = Op::hello}, text(R"({"config": 1})")); }).find("malformed hello"),
            std::string::npos);
}

TEST(HostilePsRequests, TablesWiderThanTheBoundAndRowsPastTheShardAreRefused) {
  Fixture f;
  f.hello(8);
  const std::string huge = nlohmann::json{{"dim", int64_t{1} << 40}, {"init_std", 0.1}}.dump();
  EXPECT_NE(test::message_of<ConfigError>([&] { f.request(0, {.op = Op::define_table, .table = 1}, text(huge)); })
                .find("dim must be in [1, 1048576]"),
            std::string::npos);
  f.request(0, {.op = Op::define_table, .table = 1}, text(R"({"dim": 1000, "init_std": 0.1})"));
  // Each new row costs 4 KB (sgd: no state); the 1 MiB shard takes about 250 of them.
  std::string why;
  uint64_t next_key = 0;
  for (int round = 0; round < 100 && why.empty(); ++round) {
    Bytes keys(10 * 8);  // 10 keys never pulled before
    for (int k = 0; k < 10; ++k, ++next_key) std::memcpy(keys.data() + 8 * k, &next_key, 8);
    try {
      f.request(0, {.op = Op::pull_sparse, .table = 1, .clock = -1, .count = 10}, keys);
    } catch (const ValueError& e) {
      why = e.what();
    }
  }
  EXPECT_NE(why.find("would take the shard past its 1048576 bytes"), std::string::npos) << why;
  EXPECT_LE(f.server.shard->bytes(), uint64_t{1} << 20);
}

TEST(HostilePsRequests, SparseRequestsPastTheMessageLimitAreRefused) {
  Fixture f;
  f.hello(8);
  f.request(0, {.op = Op::define_table, .table = 1}, text(R"({"dim": 1024, "init_std": 0.1})"));
  const RequestHeader h{.op = Op::pull_sparse, .table = 1, .clock = -1, .count = 100, .bytes = 800};
  EXPECT_NE(refusal([&] { f.server.expected_bytes(0, h); }).find("past the server's limit of 65536 bytes a message"),
            std::string::npos);
}

// Under bsp, each clock a worker pushed ahead of the others kept a
// dense-sized sum until the others caught up: clocks far ahead grew memory
// without bound (and clock 2^63 - 1 overflowed clock + 1).
TEST(HostilePsRequests, BspPushesFarAheadAreBoundedAndHugeClocksRefused) {
  Fixture f({.servers = 1, .workers = 2, .max_shard_bytes = 64 << 10, .max_message = 1 << 20});
  f.hello(1024, "bsp");
  f.request(0, {.op = Op::init_dense, .count = 1024}, Bytes(4096));
  std::string why;
  for (int64_t clock = 0; clock < 64 && why.empty(); ++clock) {
    try {
      f.request(0, {.op = Op::push_dense, .clock = clock, .count = 1024}, Bytes(4096));
    } catch (const ValueError& e) {
      why = e.what();
    }
  }
  EXPECT_NE(why.find("the gradients waiting for slower workers would take more than 65536 bytes"), std::string::npos)
      << why;
  EXPECT_LE(f.server.pending_bytes, uint64_t{64} << 10);
  const RequestHeader h{.op = Op::push_dense, .clock = INT64_MAX, .count = 1024, .bytes = 4096};
  EXPECT_NE(refusal([&] { f.server.expected_bytes(1, h); }).find("pushed clock 9223372036854775807"), std::string::npos);
  // A negative version overflowed the staleness, version - h.version (found by fuzz/ps_protocol.cc).
  const RequestHeader v{.op = Op::push_dense, .clock = 1, .version = INT64_MIN, .count = 1024, .bytes = 4096};
  EXPECT_NE(refusal([&] { f.server.expected_bytes(1, v); }).find("pushed against version -9223372036854775808"),
            std::string::npos);
}

// Under bsp, a clock that only sparse rows were pushed to (a worker died
// between its sparse and its dense push, after the others had finished) was
// applied as a dense gradient of no values when the death was noticed: the
// shard threw out of mark_gone, which ends a serving thread (std::terminate;
// found by fuzz/ps_protocol.cc). Such a clock is dropped: nobody finished it.
TEST(HostilePsRequests, BspClockWithOnlySparseRowsIsDroppedWhenItsWorkerDies) {
  Fixture f;
  PsConfig c;
  c.consistency = Consistency::bsp;
  c.backup_workers = 1;
  const nlohmann::json j = {{"config", c.to_json()}, {"dense_total", 8}};
  for (int w = 0; w < 2; ++w) f.request(w, {.op = Op::hello}, text(j.dump()));
  f.request(0, {.op = Op::init_dense, .count = 8}, Bytes(32));
  f.request(0, {.op = Op::define_table, .table = 3}, text(R"({"dim": 4, "init_std": 0.01})"));
  Bytes sparse(8 + 16);
  f.request(0, {.op = Op::push_sparse, .table = 3, .clock = 0, .count = 1}, sparse);
  f.request(1, {.op = Op::done}, {});
  const int64_t version = f.server.shard->version();
  f.server.mark_gone(0, "test: killed");
  EXPECT_TRUE(f.server.pending.empty());
  EXPECT_EQ(f.server.shard->version(), version);
  EXPECT_EQ(f.server.stats.dropped, 1);
}

// Integers in the hello's JSON were read with nlohmann's get<int64_t>(), which
// casts a number such as 1e300 to an integer: undefined behaviour (found by
// fuzz/ps_protocol.cc). Every integer a worker sends is now checked.
TEST(HostilePsRequests, FloatWhereAnIntegerBelongsIsRefused) {
  Fixture f;
  const nlohmann::json total = {{"config", PsConfig().to_json()}, {"dense_total", 1e300}};
  EXPECT_NE(refusal([&] { f.request(0, {.op = Op::hello}, text(total.dump())); }).find("malformed hello"),
            std::string::npos);
  nlohmann::json config = PsConfig().to_json();
  config["staleness"] = -1e300;
  const nlohmann::json stale = {{"config", config}, {"dense_total", 8}};
  EXPECT_NE(test::message_of<ConfigError>([&] { f.request(0, {.op = Op::hello}, text(stale.dump())); })
                .find("expected an integer"),
            std::string::npos);
  Fixture g;
  g.hello(8);
  const std::string table = nlohmann::json{{"dim", 1e300}, {"init_std", 0.1}}.dump();
  EXPECT_NE(refusal([&] { g.request(0, {.op = Op::define_table, .table = 1}, text(table)); })
                .find("malformed define_table"),
            std::string::npos);
}

// A timeout of 1e300 s was converted to nanoseconds: a float-to-integer
// overflow, undefined behaviour.
TEST(HostilePsRequests, TimeoutBeyondAYearIsAConfigError) {
  PsConfig c;
  c.timeout_s = 1e300;
  EXPECT_NE(test::message_of<ConfigError>([&] { c.validate(1); }).find("timeout must be in (0, 3.2e7]"),
            std::string::npos);
}

// A shard checkpoint's metadata was read with std::stoll and JSON at(): a
// malformed one threw std::invalid_argument or a JSON exception, not IoError.
TEST(HostilePsRequests, ShardFileWithMalformedMetadataIsAnIoError) {
  const std::string dir = ::testing::TempDir() + "/hostile_shard";
  std::filesystem::create_directories(dir);
  const std::vector<std::byte> four(16);
  std::map<std::string, safetensors::TensorRef> t = {{"dense", {"F32", {4}, four}}, {"dense.state", {"F32", {0}, {}}}};
  const auto write = [&](safetensors::Metadata m) {
    safetensors::write(dir + "/s.safetensors", t, m);
    return test::message_of<IoError>([&] { read_shard_file(dir + "/s.safetensors"); });
  };
  safetensors::Metadata m = {{"braid.ps.version", "x1"}, {"braid.ps.clock", "0"}, {"braid.ps.updater", "sgd"},
                             {"braid.ps.tables", "{}"}};
  EXPECT_NE(write(m).find("braid.ps.version is 'x1', not an integer"), std::string::npos);
  m["braid.ps.version"] = "1";
  m["braid.ps.tables"] = "{\"3\": {\"dim\": -2, \"init_std\": 0}}";
  EXPECT_NE(write(m).find("table 3 has dim -2"), std::string::npos);
  m["braid.ps.tables"] = "[1,";
  EXPECT_NE(write(m).find("braid.ps.tables is malformed"), std::string::npos);
  m["braid.ps.tables"] = "{\"x\": {}}";
  EXPECT_NE(write(m).find("a table id is 'x', not an integer"), std::string::npos);
}

}  // namespace
}  // namespace braid::ps
