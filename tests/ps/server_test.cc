// Parameter-server consistency models, sparse tables and shard recovery, with
// servers and workers as threads over the in-process transport.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "braid/base/error.h"
#include "braid/base/rng.h"
#include "tests/ps/ps_job.h"
#include "tests/testing/temp_dir.h"

namespace braid::ps {
namespace {

using namespace std::chrono_literals;
using testing::run_job;

constexpr int64_t kDim = 10;

// Worker w's gradient of 0.5 |p - target_w|^2.
std::vector<float> grad_of(const std::vector<float>& p, int w) {
  std::vector<float> g(p.size());
  for (size_t i = 0; i < p.size(); ++i) g[i] = p[i] - static_cast<float>(w + 1) * static_cast<float>(i % 3);
  return g;
}

std::vector<float> initial() {
  std::vector<float> p(kDim);
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.1f * static_cast<float>(i);
  return p;
}

// Plain SGD on the mean of the workers' gradients, one process.
std::vector<float> single_process_sgd(int workers, int steps, double lr) {
  std::vector<float> p = initial();
  for (int s = 0; s < steps; ++s) {
    std::vector<float> mean(p.size(), 0.0f);
    for (int w = 0; w < workers; ++w) {
      const auto g = grad_of(p, w);
      for (size_t i = 0; i < p.size(); ++i) mean[i] += g[i] / static_cast<float>(workers);
    }
    for (size_t i = 0; i < p.size(); ++i) p[i] -= static_cast<float>(lr) * mean[i];
  }
  return p;
}

// The worker loop of synchronous training through the servers.
void train(Client& c, int w, const PsConfig& config, int steps, double lr, std::vector<float>* final_weights,
           const std::function<void(int, int64_t)>& between = {}) {
  int64_t clock = c.hello(config, kDim);
  std::vector<float> p = initial();
  if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
  c.pull_dense(p, -1).wait(Deadline::after(10s));
  for (int s = 0; s < steps; ++s) {
    if (between) between(w, clock);
    const auto g = grad_of(p, w);
    c.push_dense(g, clock, lr).wait(Deadline::after(10s));
    ++clock;
    c.pull_dense(p, clock).wait(Deadline::after(10s));
  }
  if (final_weights) *final_weights = p;
  c.done();
}

class Bsp : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(Bsp, EqualsSingleProcessSgd) {
  const auto [servers, workers] = GetParam();
  const int steps = 7;
  const double lr = 0.3;
  const auto expected = single_process_sgd(workers, steps, lr);
  std::vector<std::vector<float>> got(static_cast<size_t>(workers));
  const auto r = run_job(servers, workers, 10s, [&](Client& c, int w) {
    train(c, w, {.consistency = Consistency::bsp}, steps, lr, &got[static_cast<size_t>(w)]);
  });
  for (int w = 0; w < workers; ++w) {
    for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(got[static_cast<size_t>(w)][i], expected[i], 1e-5) << w;
  }
  for (const auto& s : r.servers) {
    EXPECT_EQ(s.updates, steps);
    EXPECT_EQ(s.gradients, steps * workers);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Bsp, ::testing::Values(std::pair{1, 1}, std::pair{1, 3}, std::pair{2, 2},
                                                        std::pair{3, 4}));

TEST(Ssp, PullsNeverRunAheadOfTheBound) {
  const int workers = 3, steps = 12;
  const int64_t s = 2;
  std::atomic<int64_t> violations{0}, max_lead{0};
  run_job(2, workers, 10s, [&](Client& c, int w) {
    int64_t clock = c.hello({.consistency = Consistency::ssp, .staleness = s}, kDim);
    std::vector<float> p = initial();
    if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    Generator gen(17, static_cast<uint64_t>(w));
    for (int k = 0; k < steps; ++k) {
      // Worker 2 is the straggler.
      std::this_thread::sleep_for(std::chrono::milliseconds(w == 2 ? 8 : static_cast<int>(gen.below(3))));
      c.push_dense(grad_of(p, w), clock, 0.05).wait(Deadline::after(10s));
      ++clock;
      c.pull_dense(p, clock).wait(Deadline::after(10s));
      const ServerView v = c.view();
      if (v.slowest < clock - s) ++violations;
      max_lead = std::max<int64_t>(max_lead, clock - v.slowest);
    }
    c.done();
  });
  EXPECT_EQ(violations, 0);
  EXPECT_GT(max_lead, 0) << "the fast workers never ran ahead: the test did not exercise staleness";
}

// Worker 0's final model is the job's: it waits until the slower workers have
// pushed their last gradients and finished, and then pulls every update.
TEST(Asp, WorkerZeroWaitsForTheOthersBeforeItsFinalPull) {
  const int workers = 3, steps = 6;
  std::atomic<int> finished{0};
  std::atomic<int> seen_finished{-1};
  std::vector<float> final0;
  const auto r = run_job(2, workers, 10s, [&](Client& c, int w) {
    int64_t clock = c.hello({.consistency = Consistency::asp}, kDim);
    std::vector<float> p = initial();
    if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    for (int k = 0; k < steps; ++k) {
      if (w > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20 * w));  // worker 0 runs ahead
      c.push_dense(grad_of(p, w), clock, 0.05).wait(Deadline::after(10s));
      ++clock;
      c.pull_dense(p, -1).wait(Deadline::after(10s));
    }
    if (w == 0) {
      c.wait_for_other_workers(std::chrono::milliseconds(5));
      seen_finished = finished.load();
      c.pull_dense(p, -1).wait(Deadline::after(10s));
      final0 = p;
      EXPECT_EQ(c.view().version, 2 * steps * workers) << "some update came after worker 0's final pull";
    } else {
      ++finished;
    }
    c.done();
  });
  EXPECT_EQ(seen_finished, workers - 1);
  for (const auto& s : r.servers) EXPECT_EQ(s.updates, steps * workers);
}

// A worker waiting for the others holds back no gate: under bsp and ssp a
// worker with more steps than worker 0 goes on past worker 0's last clock,
// and worker 0's final pull has every update.
class UnevenSteps : public ::testing::TestWithParam<Consistency> {};

TEST_P(UnevenSteps, TheWorkerWithMoreStepsIsNotHeldByTheOneWaiting) {
  const int steps[2] = {2, 7};
  std::vector<float> final0, final1;
  const auto r = run_job(1, 2, 10s, [&](Client& c, int w) {
    int64_t clock = c.hello({.consistency = GetParam(), .staleness = 1, .timeout_s = 5.0}, kDim);
    std::vector<float> p = initial();
    if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    for (int k = 0; k < steps[w]; ++k) {
      c.push_dense(grad_of(p, w), clock, 0.05).wait(Deadline::after(10s));
      ++clock;
      c.pull_dense(p, clock).wait(Deadline::after(10s));
    }
    if (w == 0) {
      c.wait_for_other_workers(std::chrono::milliseconds(5));
      c.pull_dense(p, -1).wait(Deadline::after(10s));
      final0 = p;
    } else {
      final1 = p;
    }
    c.done();
  });
  EXPECT_EQ(r.servers[0].gradients, steps[0] + steps[1]);
  EXPECT_EQ(final0, final1) << "worker 0's final pull missed updates";
}

INSTANTIATE_TEST_SUITE_P(Consistency, UnevenSteps, ::testing::Values(Consistency::bsp, Consistency::ssp));

// A worker that stops without finishing (hung, still connected) holds worker
// 0's wait only until the servers call it silent (their timeout).
TEST(Asp, WaitingForTheOthersEndsWhenTheLastOneFallsSilent) {
  std::atomic<bool> waited{false};
  double waited_s = 0;
  run_job(1, 2, 1000ms, [&](Client& c, int w) {
    int64_t clock = c.hello({.consistency = Consistency::asp, .timeout_s = 0.5}, kDim);
    std::vector<float> p = initial();
    if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    c.push_dense(grad_of(p, w), clock, 0.05).wait(Deadline::after(10s));
    if (w == 1) {  // quiet until worker 0 is through waiting
      while (!waited) std::this_thread::sleep_for(10ms);
      c.done();
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    c.wait_for_other_workers(std::chrono::milliseconds(5));
    waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    waited = true;
    c.done();
  });
  EXPECT_GE(waited_s, 0.4);
  EXPECT_LT(waited_s, 5.0);
}

TEST(Asp, SilentWorkerDoesNotStopTheOthers) {
  std::atomic<bool> others_done{false};
  const auto r = run_job(1, 3, 1000ms, [&](Client& c, int w) {
    int64_t clock = c.hello({.consistency = Consistency::ssp, .staleness = 1, .timeout_s = 1.0}, kDim);
    std::vector<float> p = initial();
    if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    if (w == 2) {  // pulls once, then goes quiet until the others finish
      while (!others_done) std::this_thread::sleep_for(10ms);
      c.done();
      return;
    }
    for (int k = 0; k < 5; ++k) {
      c.push_dense(grad_of(p, w), clock, 0.05).wait(Deadline::after(10s));
      ++clock;
      c.pull_dense(p, clock).wait(Deadline::after(10s));
    }
    c.done();
    if (w == 0) others_done = true;
  });
  EXPECT_EQ(r.servers[0].gone, std::vector<int>{2});
  EXPECT_EQ(r.servers[0].updates, 10);
}

TEST(Bsp, MissingWorkerIsAnErrorNamingIt) {
  try {
    run_job(1, 3, 500ms, [&](Client& c, int w) {
      int64_t clock = c.hello({.consistency = Consistency::bsp, .timeout_s = 0.5}, kDim);
      std::vector<float> p = initial();
      if (w == 0) c.init_dense(p).wait(Deadline::after(10s));
      c.pull_dense(p, -1).wait(Deadline::after(10s));
      if (w == 2) {
        std::this_thread::sleep_for(3s);  // never pushes in time
        return;
      }
      c.push_dense(grad_of(p, w), clock, 0.05).wait(Deadline::after(10s));
      c.pull_dense(p, clock + 1).wait(Deadline::after(10s));
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bsp clock 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("workers [2]"), std::string::npos) << msg;
  }
}

TEST(Bsp, BackupWorkersCoverAStraggler) {
  const int steps = 6;
  const auto r = run_job(1, 3, 10s, [&](Client& c, int w) {
    train(c, w, {.consistency = Consistency::bsp, .backup_workers = 1}, steps, 0.1, nullptr,
          [](int w, int64_t) { if (w == 2) std::this_thread::sleep_for(30ms); });
  });
  EXPECT_EQ(r.servers[0].updates, steps);
  EXPECT_GT(r.servers[0].dropped, 0) << "the straggler's late gradients should be dropped";
  EXPECT_EQ(r.servers[0].gradients, steps * 3);
}

TEST(Softsync, StaleGradientsAreScaledAndEveryGradientCounts) {
  const auto r = run_job(1, 4, 10s, [&](Client& c, int w) {
    train(c, w, {.consistency = Consistency::softsync, .softsync_n = 2}, 5, 0.05, nullptr);
  });
  EXPECT_EQ(r.servers[0].gradients, 20);
  EXPECT_EQ(r.servers[0].updates, 10);  // ceil(4 / 2) = 2 gradients per update
}

TEST(Sparse, PullReturnsExactlyTheRowsPushed) {
  const int64_t dim = 4;
  run_job(3, 2, 10s, [&](Client& c, int w) {
    c.hello({.consistency = Consistency::asp}, kDim);
    c.define_table(7, dim, 0.0);
    // Each worker owns its keys: the row ends at -(the gradient) after one SGD step with lr 1.
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 200; ++k) keys.push_back(k * 1000003 + static_cast<uint64_t>(w));
    std::vector<float> grads(keys.size() * dim);
    for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i % 97) * 0.5f + static_cast<float>(w);
    c.push_sparse(7, keys, grads, 0, 1.0).wait(Deadline::after(10s));
    std::vector<float> rows(keys.size() * dim);
    std::reverse(keys.begin(), keys.end());
    c.pull_sparse(7, keys, rows, -1).wait(Deadline::after(10s));
    for (size_t i = 0; i < keys.size(); ++i) {
      const size_t src = keys.size() - 1 - i;
      for (int64_t j = 0; j < dim; ++j) ASSERT_EQ(rows[i * dim + j], -grads[src * dim + j]) << i;
    }
    const std::vector<uint64_t> fresh{42, 43};
    std::vector<float> zeros(2 * dim, 1.0f);
    c.pull_sparse(7, fresh, zeros, -1).wait(Deadline::after(10s));
    for (float v : zeros) ASSERT_EQ(v, 0.0f);
    c.done();
  });
}

TEST(Sparse, UndefinedTableIsRefusedWithItsName) {
  try {
    run_job(1, 1, 5s, [&](Client& c, int) {
      c.hello({.consistency = Consistency::asp}, kDim);
      std::vector<uint64_t> keys{1};
      std::vector<float> rows(3);
      c.pull_sparse(9, keys, rows, -1).wait(Deadline::after(5s));
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("table 9"), std::string::npos) << e.what();
  }
}

TEST(Recovery, ARestartedServerResumesFromItsCheckpoint) {
  test::TempDir dir;
  PsConfig config;  // (assigned, not designated: GCC 12 warns spuriously about the skipped members)
  config.checkpoint_dir = dir.str();
  config.checkpoint_every = 2;
  config.resume = true;
  std::vector<float> before;
  run_job(2, 1, 10s, [&](Client& c, int w) { train(c, w, config, 5, 0.2, &before); });
  // A new job (servers restarted) finds the shards; its initial weights are ignored.
  run_job(2, 1, 10s, [&](Client& c, int) {
    const int64_t clock = c.hello(config, kDim);
    EXPECT_EQ(clock, 5);
    std::vector<float> zeros(kDim, 0.0f), p(kDim);
    c.init_dense(zeros).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    EXPECT_EQ(p, before);
    c.done();
  });
  // A fresh run into the same folder starts over.
  config.resume = false;
  run_job(2, 1, 10s, [&](Client& c, int) {
    EXPECT_EQ(c.hello(config, kDim), 0);
    std::vector<float> zeros(kDim, 0.0f), p(kDim, 1.0f);
    c.init_dense(zeros).wait(Deadline::after(10s));
    c.pull_dense(p, -1).wait(Deadline::after(10s));
    EXPECT_EQ(p, zeros);
    c.done();
  });
}

TEST(Recovery, AJobResumedWithOtherServerCountsFollowsTheSameTrajectory) {
  PsConfig config;
  config.updater.name = "momentum";  // state that must travel with the weights
  config.resume = true;
  std::vector<float> straight, resumed;
  test::TempDir straight_dir, dir;
  config.checkpoint_dir = straight_dir.str();
  run_job(2, 2, 10s, [&](Client& c, int w) { train(c, w, config, 10, 0.2, w == 0 ? &straight : nullptr); });
  // 5 clocks on 2 servers, 3 on 3 servers (built from server-*-of-2), 2 on 1 server (from the newer server-*-of-3).
  config.checkpoint_dir = dir.str();
  run_job(2, 2, 10s, [&](Client& c, int w) { train(c, w, config, 5, 0.2, nullptr); });
  const auto three = run_job(3, 2, 10s, [&](Client& c, int w) { train(c, w, config, 3, 0.2, nullptr); });
  for (const auto& s : three.servers) EXPECT_EQ(s.recovered_version, 5);
  const auto one =
      run_job(1, 2, 10s, [&](Client& c, int w) { train(c, w, config, 2, 0.2, w == 0 ? &resumed : nullptr); });
  EXPECT_EQ(one.servers[0].recovered_version, 8);
  EXPECT_EQ(one.servers[0].clock, 10);
  EXPECT_EQ(resumed, straight);  // bsp: the partition does not change an elementwise update
}

TEST(Hello, WorkersThatDisagreeAreRefused) {
  try {
    run_job(1, 2, 2s, [&](Client& c, int w) {
      c.hello({.consistency = w == 0 ? Consistency::asp : Consistency::ssp}, kDim);
      std::this_thread::sleep_for(200ms);
      c.done();
    });
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("disagrees"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid::ps
