// The rendezvous Store's server: an in-memory key-value map behind a TCP port,
// served by one Asio thread. It runs inside `braid launch` or inside rank 0's
// process (docs/design.md, "comm"). Every connection must pass the token challenge
// (protocol.h); every frame is size-bounded, and so are the frames buffered
// in total and the connections per address. A rejected or misbehaving client
// is logged and dropped while the others keep being served. Its sockets are
// close-on-exec: `braid launch` serves the store and starts the ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace braid::comm {

struct StoreServerOptions {
  // Loopback unless told otherwise (docs/design.md, "Sockets authenticate and
  // bound what they read").
  std::string host = "127.0.0.1";
  // 0 picks a free port; port() tells which.
  int port = 0;
  // Shared secret; clients prove they know it. Must not be empty.
  std::string token{};
  // Largest frame payload accepted (bytes).
  uint32_t max_frame = 16u << 20;
  // Bound on the keys and values held (bytes); a write past it is refused.
  uint64_t max_bytes = uint64_t{1} << 30;
  // A client that has not authenticated within this time is dropped.
  std::chrono::milliseconds auth_timeout{10000};
  // Bound on the request and reply frames held at once over all connections
  // (bytes): a frame that would pass it is answered with an error and its
  // connection dropped. Frames up to 64 KiB (every honest request but a large
  // value) always pass, so the bound cannot lock out the job's own ranks.
  uint64_t max_buffered = uint64_t{64} << 20;
  // Open connections from one address (authenticated or not); more are
  // closed at once. A node's ranks and its launcher each hold one or two.
  int max_connections_per_host = 1024;
};

class StoreServer {
 public:
  // Binds and starts serving on a background thread; throws IoError when the
  // address cannot be bound.
  explicit StoreServer(StoreServerOptions options);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const;
  const std::string& host() const;
  // Connections rejected so far (bad token, oversized or malformed frame).
  int64_t rejected() const;
  // Stops serving and joins the thread; idempotent.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::comm
