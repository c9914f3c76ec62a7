// The progress engine: queues of different communicators drain at the same
// time (else crossed orders deadlock), one communicator's queue runs in
// submission order, and threads park and exit rather than pile up.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "braid/comm/engine.h"
#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

// Rank 0 issues A then B, rank 1 B then A. With one thread for both queues
// rank 0 would sit in A waiting for rank 1, which sits in B waiting for rank 0.
TEST(Engine, CrossedOrderOnTwoCommunicatorsCompletes) {
  for (bool background : {true, false}) {
    run_world(2, [&](int r, Communicator& world) {
      Communicator a = world.split(0, r), b = world.split(0, r);
      ASSERT_NE(a.id(), b.id());
      for (int round = 0; round < 20; ++round) {
        std::vector<int64_t> xa{r + 1}, xb{10 * (r + 1)};
        const AllreduceOptions o{.algorithm = Algorithm::ring, .timeout = 20s, .background = background};
        Work wa, wb;
        if (r == 0) {
          wa = a.allreduce(xa, o);
          wb = b.allreduce(xb, o);
        } else {
          wb = b.allreduce(xb, o);
          wa = a.allreduce(xa, o);
        }
        // Wait in issue order too: a waiting caller runs its own collective,
        // so the other one must start on the engine.
        (r == 0 ? wa : wb).wait(Deadline::after(30s));
        (r == 0 ? wb : wa).wait(Deadline::after(30s));
        EXPECT_EQ(xa[0], 3);
        EXPECT_EQ(xb[0], 30);
      }
    });
  }
}

// Background all-reduces on one buffer: sum, prod, sum, max... give a value
// only the submission order produces, and complete in that order.
TEST(Engine, OneCommunicatorRunsItsQueueInSubmissionOrder) {
  const std::vector<Op> ops{Op::sum, Op::prod, Op::sum, Op::max, Op::prod, Op::sum, Op::min, Op::sum};
  for (int p : {2, 3}) {
    run_world(p, [&](int r, Communicator& comm) {
      std::vector<double> x{static_cast<double>(r + 1)};
      std::mutex mu;
      std::vector<int> finished;
      std::vector<Work> works;
      for (size_t i = 0; i < ops.size(); ++i) {
        works.push_back(comm.allreduce(x, {.op = ops[i], .algorithm = Algorithm::ring, .background = true}));
        works.back().on_done([&, i](std::exception_ptr) {
          std::lock_guard lock(mu);
          finished.push_back(static_cast<int>(i));
        });
      }
      wait_all(works, Deadline::after(30s));
      // Reference: the same ops applied in order to every rank's value.
      std::vector<double> v(p);
      for (int q = 0; q < p; ++q) v[q] = q + 1;
      for (Op op : ops) {
        double acc = v[0];
        for (int q = 1; q < p; ++q) {
          if (op == Op::sum) acc += v[q];
          if (op == Op::prod) acc *= v[q];
          if (op == Op::max) acc = std::max(acc, v[q]);
          if (op == Op::min) acc = std::min(acc, v[q]);
        }
        std::fill(v.begin(), v.end(), acc);
      }
      EXPECT_EQ(x[0], v[0]);
      // A Work is done just before its callbacks run: give the last one a moment.
      const Deadline deadline = Deadline::after(10s);
      std::unique_lock lock(mu);
      while (finished.size() < ops.size() && !deadline.expired()) {
        lock.unlock();
        std::this_thread::sleep_for(1ms);
        lock.lock();
      }
      ASSERT_EQ(finished.size(), ops.size());
      for (size_t i = 0; i < finished.size(); ++i) EXPECT_EQ(finished[i], static_cast<int>(i));
    });
  }
}

// A queue whose drain blocks until `expected` drains are running at once.
struct Rendezvous final : Engine::Queue {
  std::mutex& mu;
  std::condition_variable& cv;
  int& running;
  int expected;
  std::atomic<int> drained{0};
  bool met = false;
  Rendezvous(std::mutex& m, std::condition_variable& c, int& r, int e) : mu(m), cv(c), running(r), expected(e) {}
  void drain(bool) override {
    std::unique_lock lock(mu);
    ++running;
    cv.notify_all();
    met = cv.wait_for(lock, 20s, [&] { return running >= expected; });
    lock.unlock();
    drained.fetch_add(1);
  }
};

TEST(Engine, EveryPostedQueueGetsAThreadAndIdleThreadsAreCapped) {
  Engine engine({.max_idle = 2});
  std::mutex mu;
  std::condition_variable cv;
  int running = 0;
  constexpr int kQueues = 10;
  std::vector<std::unique_ptr<Rendezvous>> queues;
  for (int i = 0; i < kQueues; ++i) queues.push_back(std::make_unique<Rendezvous>(mu, cv, running, kQueues));
  for (auto& q : queues) engine.post(q.get());
  const Deadline deadline = Deadline::after(30s);
  for (auto& q : queues) {
    while (q->drained.load() == 0) {
      ASSERT_FALSE(deadline.expired()) << "a posted queue never drained";
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_TRUE(q->met) << "the queues did not all run at the same time";
  }
  // Ten threads ran; once parked, all but max_idle exit.
  while (engine.threads() > 2) {
    ASSERT_FALSE(deadline.expired()) << engine.threads() << " threads left";
    std::this_thread::sleep_for(1ms);
  }
}

struct Counter final : Engine::Queue {
  std::atomic<int> lazy{0}, now{0};
  void drain(bool is_lazy) override { (is_lazy ? lazy : now).fetch_add(1); }
};

TEST(Engine, LazyPostsStartWithinTicksAndCanBeWithdrawn) {
  Engine engine;
  Counter started, withdrawn;
  const auto t0 = Clock::now();
  engine.post_lazily(&started);
  engine.post_lazily(&withdrawn);
  EXPECT_EQ(engine.withdraw_lazy(&withdrawn), 1);
  while (started.lazy.load() == 0) {
    ASSERT_LT(Clock::now() - t0, 10s);
    std::this_thread::sleep_for(1ms);
  }
  // Within a tick, give or take a busy machine's scheduling.
  EXPECT_LT(Clock::now() - t0, Engine::kTick * 50);
  std::this_thread::sleep_for(Engine::kTick * 3);
  EXPECT_EQ(withdrawn.lazy.load() + withdrawn.now.load(), 0);
  EXPECT_EQ(started.now.load(), 0);
}

// A queued collective nobody waits for still runs: the engine starts it.
TEST(Engine, CollectivesNobodyWaitsForStillRun) {
  run_world(3, [&](int r, Communicator& comm) {
    std::vector<float> x{static_cast<float>(r)};
    Work w = comm.allreduce(x);
    const Deadline deadline = Deadline::after(30s);
    while (!w.done()) {
      ASSERT_FALSE(deadline.expired());
      std::this_thread::sleep_for(1ms);
    }
    w.wait(Deadline::after(1s));
    EXPECT_EQ(x[0], 3.0f);
  });
}

}  // namespace
}  // namespace braid::comm::testing
