#include "braid/comm/work.h"

#include <thread>

#include "braid/base/error.h"

namespace braid::comm {

Work::Work(std::string what) : state_(std::make_shared<State>()) { state_->what = std::move(what); }

Work::Work(Describe describe) : state_(std::make_shared<State>()) { state_->describe = std::move(describe); }

Work Work::completed(std::exception_ptr error) {
  Work w;
  w.complete(std::move(error));
  return w;
}

bool Work::done() const { return state_->done.load(std::memory_order_acquire); }

void Work::wait(Deadline deadline) const {
  std::shared_ptr<const Helper> helper;
  {
    std::lock_guard lock(state_->mu);
    if (!state_->done) helper = state_->helper;
  }
  if (helper) (*helper)(*this, deadline);
  const auto spin_until = Clock::now() + kSpinBeforeSleep;
  while (!done() && Clock::now() < spin_until) std::this_thread::yield();
  sleep_until_done(deadline);
}

void Work::sleep_until_done(Deadline deadline) const {
  std::unique_lock lock(state_->mu);
  if (deadline.is_never()) {
    state_->cv.wait(lock, [&] { return state_->done.load(); });
  } else if (!state_->cv.wait_until(lock, deadline.at(), [&] { return state_->done.load(); })) {
    lock.unlock();
    const std::string& w = what();
    throw TimeoutError(fmt::format("timed out waiting for {}", w.empty() ? "a communication" : w));
  }
  if (state_->error) std::rethrow_exception(state_->error);
}

std::exception_ptr Work::error() const {
  std::lock_guard lock(state_->mu);
  return state_->error;
}

const std::string& Work::what() const {
  std::lock_guard lock(state_->mu);
  if (state_->describe) {
    state_->what = state_->describe();
    state_->describe = nullptr;
  }
  return state_->what;
}

void Work::describe(std::string what) const {
  std::lock_guard lock(state_->mu);
  state_->what = std::move(what);
  state_->describe = nullptr;
}

void Work::help_with(Helper helper) const {
  auto shared = std::make_shared<const Helper>(std::move(helper));
  std::lock_guard lock(state_->mu);
  state_->helper = std::move(shared);
}

void Work::complete(std::exception_ptr error) const {
  std::vector<std::function<void(std::exception_ptr)>> callbacks;
  {
    std::lock_guard lock(state_->mu);
    if (state_->done) return;
    state_->done.store(true, std::memory_order_release);
    state_->error = error;
    callbacks.swap(state_->callbacks);
    state_->helper = nullptr;
  }
  state_->cv.notify_all();
  for (auto& fn : callbacks) fn(error);
}

void Work::on_done(std::function<void(std::exception_ptr)> fn) const {
  std::exception_ptr error;
  {
    std::lock_guard lock(state_->mu);
    if (!state_->done) {
      state_->callbacks.push_back(std::move(fn));
      return;
    }
    error = state_->error;
  }
  fn(error);
}

void wait_all(const std::vector<Work>& works, Deadline deadline) {
  for (const Work& w : works) w.wait(deadline);
}

}  // namespace braid::comm
