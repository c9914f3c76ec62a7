// Checksums and message authentication: CRC-32 (zlib) for file integrity,
// HMAC-SHA256 (OpenSSL) for the token challenge on every accepting socket.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace braid {

using Sha256 = std::array<uint8_t, 32>;

uint32_t crc32(std::span<const std::byte> data, uint32_t running = 0);
// The CRC-32 of A followed by B from crc32(A), crc32(B) and B's length
// (zlib's crc32_combine): per-piece checksums give the whole file's without
// reading its bytes twice.
uint32_t crc32_combine(uint32_t a, uint32_t b, size_t length_b);
Sha256 hmac_sha256(std::string_view key, std::span<const std::byte> message);
// Constant-time equality, for comparing MACs.
bool equal_digests(const Sha256& a, const Sha256& b);
// Cryptographically random bytes (nonces, generated tokens).
void random_bytes(std::span<std::byte> out);
// Lower-case hex of the bytes.
std::string to_hex(std::span<const std::byte> data);

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace braid
