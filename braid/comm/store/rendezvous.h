// What ranks do with the Store: swap addresses, agree on the configuration,
// and tell each other they are alive. Keys are namespaced by `prefix` so
// several groups (or restarts of one group) can share a server.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "braid/comm/store/store.h"

namespace braid::comm {

// Each rank publishes `mine`; returns every rank's value, indexed by rank.
// The TimeoutError names the ranks that never published.
std::vector<std::string> exchange(Store& store, const std::string& prefix, int rank, int size,
                                  const std::string& mine, Deadline d);

// Each rank publishes a digest of its configuration; throws ConfigError naming
// the ranks that disagree with rank 0 (and their digests) on a mismatch.
void agree_config(Store& store, const std::string& prefix, int rank, int size,
                  const std::string& config_digest, Deadline d);

// Every rank waits until all `size` ranks have arrived at `name`.
void store_barrier(Store& store, const std::string& name, int rank, int size, Deadline d);

// Bumps "<prefix>/hb/<rank>" every `interval` on its own store connection, so
// peers can tell a live rank from a dead one without trusting clocks.
class Heartbeat {
 public:
  Heartbeat(const Store& store, std::string prefix, int rank,
            std::chrono::milliseconds interval = std::chrono::milliseconds(500));
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Watches the heartbeat counters of ranks [0, size): a rank whose counter has
// not moved for `max_silence` (measured on our own clock) is reported dead.
class HeartbeatMonitor {
 public:
  HeartbeatMonitor(std::string prefix, int size, std::chrono::milliseconds max_silence);
  // Reads the counters once; returns the ranks silent for too long.
  std::vector<int> dead_ranks(Store& store, Deadline d);

 private:
  std::string prefix_;
  std::chrono::milliseconds max_silence_;
  std::vector<std::string> last_;
  std::vector<Clock::time_point> changed_;
};

}  // namespace braid::comm
