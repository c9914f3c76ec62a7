#include "braid/base/digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <zlib.h>

#include "braid/base/error.h"

namespace braid {

uint32_t crc32(std::span<const std::byte> data, uint32_t running) {
  uLong crc = running;
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  size_t left = data.size();
  while (left > 0) {  // zlib takes 32-bit lengths
    uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = ::crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return static_cast<uint32_t>(crc);
}

uint32_t crc32_combine(uint32_t a, uint32_t b, size_t length_b) {
  return static_cast<uint32_t>(::crc32_combine64(a, b, static_cast<z_off64_t>(length_b)));
}

Sha256 hmac_sha256(std::string_view key, std::span<const std::byte> message) {
  Sha256 out{};
  unsigned int len = 0;
  const unsigned char* r =
      HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &len);
  BRAID_CHECK(r != nullptr && len == out.size(), "HMAC-SHA256 failed");
  return out;
}

bool equal_digests(const Sha256& a, const Sha256& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void random_bytes(std::span<std::byte> out) {
  BRAID_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(out.size())) == 1,
              "RAND_bytes failed");
}

std::string to_hex(std::span<const std::byte> data) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(data.size() * 2);
  for (std::byte b : data) {
    s.push_back(kDigits[static_cast<unsigned>(b) >> 4]);
    s.push_back(kDigits[static_cast<unsigned>(b) & 15]);
  }
  return s;
}

}  // namespace braid
