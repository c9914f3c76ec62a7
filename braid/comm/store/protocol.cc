#include "braid/comm/store/protocol.h"

#include <cstring>

#include "braid/base/error.h"

namespace braid::comm::store {

Sha256 auth_mac(std::string_view token, std::string_view domain,
                std::span<const std::byte> nonce) {
  std::string message(domain);
  message.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  return hmac_sha256(token, as_bytes(message));
}

namespace {
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
}  // namespace

std::string encode(uint8_t head, const std::vector<std::string>& fields) {
  std::string out;
  size_t total = 1;
  for (const auto& f : fields) total += 4 + f.size();
  out.reserve(total);
  out.push_back(static_cast<char>(head));
  for (const auto& f : fields) {
    put_u32(out, static_cast<uint32_t>(f.size()));
    out += f;
  }
  return out;
}

Decoded decode(std::string_view payload) {
  if (payload.empty()) fail<PeerError>("store: empty frame");
  Decoded d;
  d.head = static_cast<uint8_t>(payload[0]);
  size_t pos = 1;
  while (pos < payload.size()) {
    if (payload.size() - pos < 4) fail<PeerError>("store: truncated field header at byte {}", pos);
    if (d.fields.size() == kMaxFields) fail<PeerError>("store: frame with more than {} fields", kMaxFields);
    uint32_t n = get_u32(payload.data() + pos);
    pos += 4;
    if (payload.size() - pos < n) {
      fail<PeerError>("store: field of {} bytes overruns the {}-byte frame", n, payload.size());
    }
    d.fields.emplace_back(payload.substr(pos, n));
    pos += n;
  }
  return d;
}

std::array<std::byte, 4> length_prefix(uint32_t n) {
  std::array<std::byte, 4> b;
  for (int i = 0; i < 4; ++i) b[i] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
  return b;
}

uint32_t read_length(std::span<const std::byte, 4> bytes) {
  return get_u32(reinterpret_cast<const char*>(bytes.data()));
}

}  // namespace braid::comm::store
