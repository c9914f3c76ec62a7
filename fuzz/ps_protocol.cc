// Fuzzes a parameter server's handling of workers' requests (ps/protocol.h):
// the request header, the payload size the server accepts for it, and the
// payload itself (hello and define_table JSON, dense values or a codec's
// message, sparse keys and rows), in sequences from two workers against one
// server, as Server::Impl::serve() does with what it receives.
//
// Input: repeated { u8 worker | RequestHeader (64 bytes) | the payload }.
// A pull whose gate is closed is skipped (the server would wait for other
// workers), and so is a hello naming a checkpoint folder (the server would
// write files there). Bounds are small (1 MiB shard, 256 KiB messages) so
// inputs reach them.
#include <nlohmann/json.hpp>

#include "braid/ps/server_impl.h"
#include "fuzz/fuzz.h"

namespace {

using namespace braid;

// The server's transport; the harness hands it requests directly, so it is never used.
class NoTransport final : public comm::Transport {
 public:
  int rank() const override { return 0; }
  int size() const override { return 3; }
  std::string name() const override { return "none"; }
  comm::Work send(int, uint64_t, std::span<const std::byte>) override { __builtin_trap(); }
  comm::Work recv(int, uint64_t, std::span<std::byte>) override { __builtin_trap(); }
};

bool writes_files(std::span<const std::byte> hello) {
  const auto j = nlohmann::json::parse(reinterpret_cast<const char*>(hello.data()),
                                       reinterpret_cast<const char*>(hello.data() + hello.size()), nullptr, false);
  if (!j.is_object() || !j.contains("config") || !j["config"].is_object()) return false;
  const auto dir = j["config"].find("checkpoint_dir");
  return dir != j["config"].end() && !(dir->is_string() && dir->get<std::string>().empty());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  NoTransport t;
  ps::Server::Impl server(t, {.servers = 1, .workers = 2, .timeout = std::chrono::seconds(1),
                              .max_shard_bytes = 1 << 20, .max_message = 256 << 10});
  ps::Bytes payload;  // the payload copied, as serve() receives it: aligned for its f32 and u64 views
  ps::ReusedBuffer out;
  bool gone[2] = {false, false};
  while (in.left() > 0) {
    const int worker = in.take<uint8_t>() % 2;
    const auto h = in.take<ps::RequestHeader>();
    if (gone[worker]) continue;  // its serving thread has ended
    if (h.magic != ps::kMagic) return 0;  // serve() drops the worker
    try {
      const uint64_t n = server.expected_bytes(worker, h);
      if (n > in.left()) return 0;  // the rest never arrives
      const auto bytes = in.bytes(n);
      payload.assign(bytes.begin(), bytes.end());
      if (h.op == ps::Op::hello && writes_files(payload)) continue;
      if (h.op == ps::Op::pull_dense || h.op == ps::Op::pull_sparse) {
        std::lock_guard l(server.mu);
        if (!server.gate_open(h.clock, h.op == ps::Op::pull_dense)) continue;
      }
      ps::ReplyHeader reply;
      server.handle(worker, h, payload, reply, out);
      if (reply.bytes != out.size) __builtin_trap();
      if (server.shard && server.shard->bytes() > (1 << 20)) __builtin_trap();  // the bound did not hold
    } catch (const Error& e) {
      // Refused: serve() answers with the reason and drops the worker; the
      // server goes on with the others (or fails, under bsp), so the harness does too.
      gone[worker] = true;
      server.mark_gone(worker, e.what());
    }
  }
  return 0;
}
