#include "braid/parallel/member_watch.h"

#include <algorithm>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/base/thread_name.h"

namespace braid::parallel {

namespace {

// Often enough to notice within max_silence plus a quarter of it, at most
// once a second (K reads per member per interval reach the one store).
std::chrono::milliseconds interval_for(Duration max_silence) {
  const auto quarter = std::chrono::duration_cast<std::chrono::milliseconds>(max_silence / 4);
  return std::clamp(quarter, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
}

}  // namespace

MemberWatch::MemberWatch(const comm::Store& store, std::string prefix, int member, int members, Duration max_silence)
    : max_silence_(max_silence), beat_(store, prefix, member, interval_for(max_silence)) {
  const auto interval = interval_for(max_silence);
  thread_ = std::thread([this, own = store.clone(), prefix, members, interval]() mutable {
    name_this_thread("member watch");
    comm::HeartbeatMonitor monitor(prefix, members, std::chrono::duration_cast<std::chrono::milliseconds>(max_silence_));
    while (!stop_.load()) {
      try {
        std::vector<int> dead = monitor.dead_ranks(own, Deadline::after(interval * 4));
        if (!dead.empty()) {
          std::lock_guard lock(mu_);
          dead_ = std::move(dead);
          any_dead_ = true;
        }
      } catch (const Error& e) {
        // The store itself unreachable says nothing about one member; the
        // members' own collectives still have their deadlines.
        logging::warn("member watch: {}", e.what());
      }
      for (auto slept = std::chrono::milliseconds(0); slept < interval && !stop_.load();
           slept += std::chrono::milliseconds(20)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
}

MemberWatch::~MemberWatch() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<int> MemberWatch::dead() const {
  std::lock_guard lock(mu_);
  return dead_;
}

}  // namespace braid::parallel
