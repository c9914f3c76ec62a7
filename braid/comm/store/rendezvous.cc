#include "braid/comm/store/rendezvous.h"

#include <map>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/base/thread_name.h"

namespace braid::comm {

namespace {
std::vector<std::string> keys_for(const std::string& prefix, int size) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(fmt::format("{}/{}", prefix, r));
  return keys;
}
}  // namespace

std::vector<std::string> exchange(Store& store, const std::string& prefix, int rank, int size,
                                  const std::string& mine, Deadline d) {
  BRAID_CHECK(rank >= 0 && rank < size, "rank {} of {}", rank, size);
  auto keys = keys_for(prefix, size);
  store.set(keys[rank], mine, d);
  const auto t0 = Clock::now();
  try {
    store.wait(keys, d);
  } catch (const TimeoutError& e) {
    // The store names keys; the reader wants ranks (a rank that never started,
    // crashed early, or was refused for a wrong token, which only its own
    // output and the store's log show).
    std::vector<int> missing;
    const Deadline look = Deadline::after(std::chrono::seconds(1));
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;  // published above
      try {
        if (!store.try_get(keys[r], look)) missing.push_back(r);
      } catch (const Error&) {
        missing.push_back(r);
      }
    }
    fail<TimeoutError>("rank {}: ranks [{}] never published '{}' within {} (not started, failed before joining, or "
                       "refused by the store: check their output and BRAID_TOKEN) [{}]",
                       rank, fmt::join(missing, ", "), prefix, format_duration(Clock::now() - t0), e.what());
  }
  std::vector<std::string> values;
  values.reserve(size);
  for (const auto& k : keys) values.push_back(store.get(k, d));
  return values;
}

void agree_config(Store& store, const std::string& prefix, int rank, int size,
                  const std::string& config_digest, Deadline d) {
  auto all = exchange(store, prefix + "/config", rank, size, config_digest, d);
  std::map<std::string, std::vector<int>> groups;
  for (int r = 0; r < size; ++r) groups[all[r]].push_back(r);
  if (groups.size() == 1) return;
  std::vector<std::string> parts;
  for (const auto& [digest, ranks] : groups) {
    parts.push_back(fmt::format("ranks [{}] have {}", fmt::join(ranks, ", "), digest));
  }
  std::vector<int> disagree;
  for (int r = 0; r < size; ++r)
    if (all[r] != all[0]) disagree.push_back(r);
  fail<ConfigError>("ranks [{}] disagree with rank 0 on the configuration: {}",
                    fmt::join(disagree, ", "), fmt::join(parts, "; "));
}

void store_barrier(Store& store, const std::string& name, int rank, int size, Deadline d) {
  auto t0 = Clock::now();
  store.set(fmt::format("{}/{}", name, rank), "1", d);
  try {
    store.wait(keys_for(name, size), d);
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("rank {}: barrier '{}' timed out after {}: {}", rank, name,
                       format_duration(Clock::now() - t0), e.what());
  }
}

Heartbeat::Heartbeat(const Store& store, std::string prefix, int rank,
                     std::chrono::milliseconds interval) {
  auto key = fmt::format("{}/hb/{}", prefix, rank);
  Store own = store.clone();
  thread_ = std::thread([this, key, interval, own = std::move(own)]() mutable {
    name_this_thread("heartbeat");
    while (!stop_.load()) {
      try {
        own.add(key, 1, Deadline::after(interval * 4));
      } catch (const Error& e) {
        logging::warn("heartbeat {}: {}", key, e.what());
      }
      for (auto slept = std::chrono::milliseconds(0); slept < interval && !stop_.load();
           slept += std::chrono::milliseconds(20)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
}

Heartbeat::~Heartbeat() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

HeartbeatMonitor::HeartbeatMonitor(std::string prefix, int size,
                                   std::chrono::milliseconds max_silence)
    : prefix_(std::move(prefix)),
      max_silence_(max_silence),
      last_(size),
      changed_(size, Clock::now()) {}

std::vector<int> HeartbeatMonitor::dead_ranks(Store& store, Deadline d) {
  std::vector<int> dead;
  auto now = Clock::now();
  for (size_t r = 0; r < last_.size(); ++r) {
    auto v = store.try_get(fmt::format("{}/hb/{}", prefix_, r), d).value_or("");
    if (v != last_[r]) {
      last_[r] = v;
      changed_[r] = now;
    } else if (now - changed_[r] > max_silence_) {
      dead.push_back(static_cast<int>(r));
    }
  }
  return dead;
}

}  // namespace braid::comm
