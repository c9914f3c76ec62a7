#include "braid/comm/engine.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "braid/base/thread_name.h"

namespace braid::comm {

// Shared with the threads, which are detached: a thread that has said it
// exited may still be unwinding, so the state outlives the Engine.
struct Engine::State {
  Options options;
  std::mutex mu;
  std::condition_variable parked_cv;  // parked threads wait here
  std::condition_variable tick_cv;    // the ticking thread naps here
  std::condition_variable exited_cv;  // ~Engine waits here for threads == 0
  std::deque<std::pair<Queue*, bool>> ready;  // (queue, answers a lazy post)
  std::vector<Queue*> lazy;
  Clock::time_point last_post{};
  int threads = 0;
  int parked = 0;
  int wakes = 0;              // parked threads notified that have not woken yet
  bool ticker = false;        // a thread is ticking
  bool ticker_coming = false; // a thread was woken or started to tick
  bool stopping = false;

  // One more thread will look at `ready`: a parked one, or a new one.
  void wake_or_spawn(const std::shared_ptr<State>& self) {
    if (parked > wakes) {
      ++wakes;
      parked_cv.notify_one();
      return;
    }
    ++threads;
    std::thread([self] { self->loop(self); }).detach();
  }

  void loop(const std::shared_ptr<State>& self) {
    name_this_thread("comm-engine");
    std::unique_lock lock(mu);
    for (;;) {
      if (!ready.empty()) {
        const auto [q, lazy_post] = ready.front();
        ready.pop_front();
        lock.unlock();
        q->drain(lazy_post);  // q may be gone once this returns
        lock.lock();
        continue;
      }
      if (stopping) break;
      if (!ticker && (!lazy.empty() || Clock::now() - last_post < kStayAwake)) {
        ticker = true;
        ticker_coming = false;
        tick_cv.wait_for(lock, kTick);
        ticker = false;
        // This thread takes the first; each of the others needs a thread too.
        for (size_t i = 0; i < lazy.size(); ++i) {
          ready.emplace_back(lazy[i], true);
          if (i > 0) wake_or_spawn(self);
        }
        lazy.clear();
        continue;
      }
      if (parked + (ticker ? 1 : 0) >= options.max_idle) break;  // idle threads kept: max_idle
      ++parked;
      parked_cv.wait(lock);
      --parked;
      if (wakes > 0) --wakes;
    }
    --threads;
    exited_cv.notify_all();
  }
};

Engine::Engine(Options options) : state_(std::make_shared<State>()) {
  state_->options = options;
}

Engine::~Engine() {
  std::unique_lock lock(state_->mu);
  state_->stopping = true;
  state_->parked_cv.notify_all();
  state_->tick_cv.notify_all();
  // Threads hold no work by now (every queue has answered its posts), so they
  // exit at once; the deadline only keeps a destructor from hanging. A thread
  // still running after it keeps the state alive through its own reference.
  state_->exited_cv.wait_for(lock, std::chrono::seconds(10), [&] { return state_->threads == 0; });
}

void Engine::post(Queue* q) {
  std::lock_guard lock(state_->mu);
  state_->ready.emplace_back(q, false);
  state_->wake_or_spawn(state_);
}

void Engine::post_lazily(Queue* q) {
  std::lock_guard lock(state_->mu);
  state_->lazy.push_back(q);
  state_->last_post = Clock::now();
  if (!state_->ticker && !state_->ticker_coming) {
    state_->ticker_coming = true;
    state_->wake_or_spawn(state_);
  }
}

int Engine::withdraw_lazy(Queue* q) {
  std::lock_guard lock(state_->mu);
  const auto end = std::remove(state_->lazy.begin(), state_->lazy.end(), q);
  const int n = static_cast<int>(state_->lazy.end() - end);
  state_->lazy.erase(end, state_->lazy.end());
  return n;
}

int Engine::threads() const {
  std::lock_guard lock(state_->mu);
  return state_->threads;
}

}  // namespace braid::comm
