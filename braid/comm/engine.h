// The progress engine: threads shared by every communicator split from one
// root, lent to a communicator while it has queued collectives.
//
// A communicator keeps its own queue and runs it serially, in submission
// order; the engine only decides *which thread* drains it. Queues of
// different communicators must be able to drain at the same time: rank 0 may
// issue a collective on A then one on B while rank 1 issues B then A (both in
// the background). If one thread served both queues, rank 0's thread would sit
// in A waiting for rank 1, whose thread sits in B waiting for rank 0 -- a
// deadlock no timeout-free schedule avoids. So every queue that is ready gets
// a thread of its own (an idle one, or a new one); a thread whose queue has
// drained parks, and parked threads beyond `max_idle` exit, so an idle mesh of
// many communicators holds a couple of threads, not one per communicator.
//
// Collectives nobody waits for yet are posted lazily: waking a thread costs
// more than a small collective, and the caller usually waits at once and runs
// it itself (Communicator::Impl::help). While posts keep coming one thread
// "ticks": it naps kTick at a time and starts lazily posted queues it finds.
#pragma once

#include <memory>

#include "braid/base/deadline.h"

namespace braid::comm {

class Engine {
 public:
  // What the engine runs: drain(lazy) runs queued work until the queue is empty
  // (or another thread runs it); `lazy` says which post it answers.
  class Queue {
   public:
    virtual void drain(bool lazy) = 0;

   protected:
    ~Queue() = default;
  };

  // The ticking thread's nap (a lazily posted queue starts within it), and how
  // long it keeps ticking after the last post. The tick is coarse because each
  // nap costs a wake-up: at 1 ms (30 per step of the CNN) two data-parallel
  // ranks on two cores trained 6-12 % slower.
  static constexpr Duration kTick = std::chrono::milliseconds(10);
  static constexpr Duration kStayAwake = std::chrono::seconds(1);

  struct Options {
    int max_idle = 2;  // idle threads kept (parked or ticking); more exit
  };
  explicit Engine(Options options);
  Engine() : Engine(Options{}) {}
  // Waits for the engine's threads to exit. Every queue must have answered all
  // its posts (a communicator waits for that before it goes).
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Drain `q` on an engine thread now. The queue must stay alive until its
  // drain(false) for this post has returned.
  void post(Queue* q);
  // Drain `q` within kTick (unless withdrawn first).
  void post_lazily(Queue* q);
  // Takes back `q`'s lazy posts that have not started; returns how many.
  int withdraw_lazy(Queue* q);

  // Threads alive now (running, ticking or parked).
  int threads() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace braid::comm
