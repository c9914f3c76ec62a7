// The one tag space of a transport: every message braid sends carries a 64-bit
// tag built here, so communicators sharing a transport, and protocols beside
// them (the parameter server), never match each other's messages.
//
//   bit 63      0 = collective, 1 = point-to-point / diagnostics / service
//   bits 62..40 id (23 bits):
//                 1 .. kLastCommunicatorId   communicators (root 1; a split's
//                                            children get fresh ids, see
//                                            communicator_split.cc)
//                 kFirstServiceId .. 2^23-1  services (fixed, below)
//   collective: bits 39..16 sequence number (mod 2^24), bits 15..0 lane
//   p2p:        bits 39..0 user tag (< 2^39); 2^39 + {0, 1, 2}: arrival queries, replies,
//               failure notices (comm/arrivals.h)
//   service:    bits 39..0 the service's own message kinds
//
// A communicator id is unique among the communicators any one rank is in, so
// a (peer, tag) pair names one communicator on the receiving rank; no
// communicator ever gets a service id.
#pragma once

#include <cstdint>

namespace braid::comm {

inline constexpr uint64_t kP2PBit = 1ull << 63;
inline constexpr uint64_t kMaxUserTag = 1ull << 39;
inline constexpr uint32_t kIdMask = (1u << 23) - 1;
inline constexpr uint32_t kFirstServiceId = kIdMask - 255;
inline constexpr uint32_t kLastCommunicatorId = kFirstServiceId - 1;
inline constexpr uint32_t kRootCommunicatorId = 1;

// Protocols that talk over a transport directly, each with an id of its own.
enum class Service : uint32_t {
  parameter_server = kIdMask,
};

constexpr uint64_t collective_tag(uint32_t id, uint64_t seq) {
  return (static_cast<uint64_t>(id & kIdMask) << 40) | ((seq & 0xffffff) << 16);
}
constexpr uint64_t p2p_tag(uint32_t id, uint64_t user) {
  return kP2PBit | (static_cast<uint64_t>(id & kIdMask) << 40) | user;
}
// Message kind `kind` (< 2^40) of `service`.
constexpr uint64_t service_tag(Service service, uint64_t kind) {
  return kP2PBit | (static_cast<uint64_t>(service) << 40) | (kind & ((1ull << 40) - 1));
}
// The communicator or service id a tag belongs to.
constexpr uint32_t tag_id(uint64_t tag) { return static_cast<uint32_t>(tag >> 40) & kIdMask; }

}  // namespace braid::comm
