// Fuzzes the rendezvous Store's protocol after authentication: the frames a
// client sends (u32 length | payload; protocol.h), each decoded and applied to
// one key-value map as the server would (requests.h), so sequences of
// requests reach every op and the map's bound. (Clients decode the server's
// responses with the same decode().)
//
// Checked besides the contract (fuzz.h): the map's byte count is exact and
// within its bound after every request.
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/requests.h"
#include "fuzz/fuzz.h"

namespace {

constexpr uint64_t kMaxBytes = 4 << 10;  // the map's bound, small so it is reached

void check(const braid::comm::store::KeyValues& kv) {
  uint64_t sum = 0;
  for (const auto& [k, v] : kv.map) sum += k.size() + v.size();
  if (sum != kv.bytes || kv.bytes > kv.max_bytes) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  braid::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace store = braid::comm::store;
  braid::fuzz::Input in(data, size);
  store::KeyValues kv;
  kv.max_bytes = kMaxBytes;
  while (in.left() >= 4) {
    const uint32_t n = store::read_length(in.take<std::array<std::byte, 4>>());
    if (n > store::kDefaultMaxFrame) return 0;  // the server answers "too large" and hangs up
    const std::string_view payload = in.text(n);
    braid::fuzz::refused_or_ok([&] {
      const store::Outcome out = store::apply(kv, store::decode(payload));
      if (out.kind == store::Outcome::Kind::wait && (out.wait_ms < 0 || out.wait_ms > store::kMaxWaitMs))
        __builtin_trap();  // the timer would overflow
    });
    check(kv);
  }
  return 0;
}
