// Client of the rendezvous Store (server.h): ranks use it to find each other,
// agree on the run's configuration and publish heartbeats (rendezvous.h).
//
// A Store is one authenticated TCP connection. Calls are serialized on it, so
// several threads may share one Store; a thread that blocks for long (a
// heartbeat) should use its own clone(). Every call has a deadline; the
// overloads without one use StoreOptions::timeout. A call that times out or
// fails on the wire drops the connection; the next call reconnects.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "braid/base/deadline.h"

namespace braid::comm {

struct StoreOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string token{};
  // Connecting retries until this passes (the server may start after us).
  std::chrono::milliseconds connect_timeout{60000};
  // Default deadline of each call.
  std::chrono::milliseconds timeout{300000};
  // Who is asking ("rank 3"), for error messages.
  std::string who = "this process";
  // Largest response payload read (bytes).
  uint32_t max_frame = 16u << 20;
};

class Store {
 public:
  // Connects and authenticates; throws TimeoutError when the server cannot be
  // reached before connect_timeout, PeerError when it rejects the token.
  explicit Store(StoreOptions options);
  ~Store();
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;

  // A second, independent connection with the same options.
  Store clone() const;
  const StoreOptions& options() const;

  void set(std::string_view key, std::string_view value, Deadline d);
  void set(std::string_view key, std::string_view value) { set(key, value, deadline()); }
  // Waits until the key exists, then returns its value.
  std::string get(std::string_view key, Deadline d);
  std::string get(std::string_view key) { return get(key, deadline()); }
  // The value, or nothing when the key does not exist (does not wait).
  std::optional<std::string> try_get(std::string_view key, Deadline d);
  // Atomically adds `delta` to the integer counter at `key` (missing = 0) and
  // returns the new value.
  int64_t add(std::string_view key, int64_t delta, Deadline d);
  int64_t add(std::string_view key, int64_t delta) { return add(key, delta, deadline()); }
  // Waits until every key exists; the TimeoutError names the missing ones.
  void wait(const std::vector<std::string>& keys, Deadline d);
  void wait(const std::vector<std::string>& keys) { wait(keys, deadline()); }
  // Sets `key` to `desired` if its value is `expected` (a missing key matches
  // an empty `expected`); returns the value after the call.
  std::string compare_set(std::string_view key, std::string_view expected,
                          std::string_view desired, Deadline d);
  // Deletes the key; false when it did not exist.
  bool remove(std::string_view key, Deadline d);
  bool remove(std::string_view key) { return remove(key, deadline()); }

  // Now + the default call timeout.
  Deadline deadline() const;

  struct Impl;

 private:
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::comm
