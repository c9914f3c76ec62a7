#include "braid/comm/transport/faulty.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <thread>

#include "braid/base/error.h"

namespace braid::comm {

// Runs callbacks at their due time on one thread, in due order (and in
// posting order for equal times, so delayed sends keep their FIFO order).
struct FaultyTransport::Delayer {
  std::mutex mu;
  std::condition_variable cv;
  std::multimap<Clock::time_point, std::function<void()>> due;
  bool stop = false;
  std::thread thread{[this] { run(); }};

  ~Delayer() {
    {
      std::lock_guard l(mu);
      stop = true;
    }
    cv.notify_all();
    thread.join();
  }

  void post(Clock::time_point at, std::function<void()> fn) {
    {
      std::lock_guard l(mu);
      due.emplace(at, std::move(fn));
    }
    cv.notify_all();
  }

  void run() {
    std::unique_lock l(mu);
    while (true) {
      if (due.empty()) {
        if (stop) return;
        cv.wait(l);
        continue;
      }
      auto it = due.begin();
      if (Clock::now() < it->first && !stop) {
        cv.wait_until(l, it->first);
        continue;
      }
      auto fn = std::move(it->second);
      due.erase(it);
      l.unlock();
      fn();  // on stop, pending sends still go out (late) rather than vanish
      l.lock();
    }
  }
};

FaultyTransport::FaultyTransport(std::unique_ptr<Transport> inner, FaultPlan plan)
    : inner_(std::move(inner)), plan_(std::move(plan)), delayer_(std::make_unique<Delayer>()) {}

FaultyTransport::~FaultyTransport() { delayer_.reset(); }

void FaultyTransport::set_plan(FaultPlan plan) {
  std::lock_guard l(mu_);
  plan_ = std::move(plan);
}

FaultPlan FaultyTransport::plan() const {
  std::lock_guard l(mu_);
  return plan_;
}

namespace {
Work cut_error(int me, int peer, const char* op) {
  return Work::completed(std::make_exception_ptr(PeerError(
      fmt::format("rank {}: {} with rank {} failed: link cut (fault injection)", me, op, peer))));
}
}  // namespace

Work FaultyTransport::send(int peer, uint64_t tag, std::span<const std::byte> data) {
  std::unique_lock l(mu_);
  const FaultPlan& p = plan_;
  if (p.cut.contains(peer)) return cut_error(rank(), peer, "send");
  if (p.drop_to.contains(peer)) return Work::completed();
  if (p.send_delay.count() == 0 && p.link_bytes_per_s <= 0) {
    l.unlock();
    return inner_->send(peer, tag, data);
  }
  Clock::time_point at = Clock::now();
  if (p.link_bytes_per_s > 0) {
    Clock::time_point& idle = link_free_[peer];
    idle = std::max(idle, at) + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(static_cast<double>(data.size()) / p.link_bytes_per_s));
    at = idle;
  }
  at += p.send_delay;
  Work outer(fmt::format("rank {} delayed send to rank {} (tag {}, {} bytes)", rank(), peer, tag,
                         data.size()));
  // Posted under mu_, so sends to one peer reach the delayer in link order.
  delayer_->post(at, [this, outer, peer, tag, data] {
    try {
      inner_->send(peer, tag, data).on_done([outer](std::exception_ptr e) { outer.complete(e); });
    } catch (...) {
      outer.complete(std::current_exception());
    }
  });
  return outer;
}

Work FaultyTransport::recv(int peer, uint64_t tag, std::span<std::byte> data) {
  if (plan().cut.contains(peer)) return cut_error(rank(), peer, "recv");
  return inner_->recv(peer, tag, data);
}

}  // namespace braid::comm
