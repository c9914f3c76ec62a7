// Wire format of the rendezvous Store (server.h, store.h).
//
// Connection: the server sends a 32-byte random nonce; the client answers with
// HMAC-SHA256(token, "braid-store" || nonce) (32 bytes); the server answers one
// byte, kAuthOk or kAuthRejected, and closes on rejection. After that every
// request and every response is one frame:
//
//   u32 payload length (little-endian, bounded by max_frame) | payload
//   request payload:  u8 Op     | fields
//   response payload: u8 Status | fields
//   field:            u32 length | bytes
//
// One request is outstanding per connection, so no request ids are needed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "braid/base/digest.h"

namespace braid::comm::store {

enum class Op : uint8_t {
  kSet = 1,         // key, value                   -> ok
  kGet = 2,         // key                          -> ok value | not_found
  kAdd = 3,         // key, delta (decimal)         -> ok new value (decimal)
  kWait = 4,        // timeout ms (decimal), keys.. -> ok | timeout missing keys..
  kCompareSet = 5,  // key, expected, desired       -> ok value after the call
  kDelete = 6,      // key                          -> ok "1" | ok "0"
  kPing = 7,        //                              -> ok
};

enum class Status : uint8_t { kOk = 0, kNotFound = 1, kTimeout = 2, kError = 3 };

inline constexpr size_t kNonceBytes = 32;
inline constexpr uint8_t kAuthOk = 1;
inline constexpr uint8_t kAuthRejected = 0;
// Default bound on one frame's payload (bytes): generous for addresses and
// config hashes, small enough that a stray or hostile peer cannot make the
// server allocate gigabytes.
inline constexpr uint32_t kDefaultMaxFrame = 16u << 20;
// Most fields one frame may carry: an empty field costs 4 bytes on the wire
// but a std::string (32 bytes) decoded, so the count is bounded apart from
// the frame's size. A wait for every rank's key is the largest legitimate.
inline constexpr size_t kMaxFields = size_t{1} << 16;

// The MAC a client sends for `nonce`; `domain` separates uses of one token
// ("braid-store", "braid-tcp").
Sha256 auth_mac(std::string_view token, std::string_view domain,
                std::span<const std::byte> nonce);

// Builds a payload (without the length prefix) from a leading byte and fields.
std::string encode(uint8_t head, const std::vector<std::string>& fields);

// Splits a payload into its leading byte and fields; throws PeerError on a
// malformed payload or one of more than kMaxFields fields.
struct Decoded {
  uint8_t head = 0;
  std::vector<std::string> fields;
};
Decoded decode(std::string_view payload);

// u32 little-endian length prefix.
std::array<std::byte, 4> length_prefix(uint32_t n);
uint32_t read_length(std::span<const std::byte, 4> bytes);

}  // namespace braid::comm::store
