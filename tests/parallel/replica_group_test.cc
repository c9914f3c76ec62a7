// In-job recovery of data-parallel replicas (parallel/fault_tolerance):
// replicas as threads of this process, each with its own store connection
// and tcp transports over loopback, as separate processes would have.
#include "braid/parallel/fault_tolerance/replica_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/store/server.h"
#include "tests/comm/thread_ranks.h"

namespace braid::parallel::fault_tolerance {
namespace {

using namespace std::chrono_literals;

constexpr size_t kValues = 1000;

ReplicaGroupOptions options(int slot, int slots, bool joining = false) {
  return {.slot = slot, .slots = slots, .joining = joining, .prefix = "ft", .config_hash = "abc",
          .timeout = 2s, .max_silence = 300ms, .token = "t"};
}

comm::Store store_for(const comm::StoreServer& server, int slot) {
  return comm::Store({.port = server.port(), .token = "t", .connect_timeout = 5000ms, .timeout = 5000ms,
                      .who = fmt::format("replica {}", slot)});
}

// A replica's training state in these tests: its steps applied and weights.
struct Replica {
  int64_t position = 0;
  std::vector<float> weights = std::vector<float>(kValues, 0.0f);

  void connect(ReplicaGroup& g) {
    g.set_state_io(
        [this] {
          std::vector<std::byte> b(sizeof(int64_t) + weights.size() * sizeof(float));
          std::memcpy(b.data(), &position, sizeof(int64_t));
          std::memcpy(b.data() + sizeof(int64_t), weights.data(), weights.size() * sizeof(float));
          return b;
        },
        [this](std::span<const std::byte> b) {
          ASSERT_EQ(b.size(), sizeof(int64_t) + weights.size() * sizeof(float));
          std::memcpy(&position, b.data(), sizeof(int64_t));
          std::memcpy(weights.data(), b.data() + sizeof(int64_t), weights.size() * sizeof(float));
        });
  }
  // One step whose gradient is `value` everywhere; the averaged gradient is returned.
  float step(ReplicaGroup& g, float value) {
    std::vector<float> grad(kValues, value);
    if (g.average(grad, position) == ReplicaGroup::Outcome::replaced) return NAN;
    for (size_t i = 0; i < kValues; ++i) weights[i] -= grad[i];
    ++position;
    g.at_step_boundary(position);
    return grad[0];
  }
};

TEST(ReplicaGroup, AKilledReplicaIsDroppedAndTheSurvivorsAverageAmongThemselves) {
  comm::StoreServer server({.token = "t"});
  std::vector<float> means(4);
  std::vector<std::vector<MembershipChange>> changes(4);
  std::vector<double> recovery_s(4);
  comm::testing::on_threads(4, [&](int slot) {
    comm::Store store = store_for(server, slot);
    auto g = std::make_unique<ReplicaGroup>(store, options(slot, 4));
    Replica r;
    EXPECT_FLOAT_EQ(r.step(*g, static_cast<float>(slot + 1)), 2.5f);  // (1 + 2 + 3 + 4) / 4
    if (slot == 3) {
      g.reset();  // killed: its sockets close and its heartbeat stops
      return;
    }
    const auto t0 = Clock::now();
    means[slot] = r.step(*g, static_cast<float>(slot + 1));
    recovery_s[slot] = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_FLOAT_EQ(r.step(*g, 1.0f), 1.0f);  // and on, among three
    changes[slot] = g->take_changes();
    EXPECT_EQ(r.position, 3);
  });
  for (int slot = 0; slot < 3; ++slot) {
    EXPECT_FLOAT_EQ(means[slot], 2.0f) << "the mean of the survivors' 1, 2, 3";
    ASSERT_EQ(changes[slot].size(), 1u);
    const MembershipChange& c = changes[slot][0];
    EXPECT_EQ(c.epoch, 1);
    EXPECT_EQ(c.step, 1);
    EXPECT_EQ(c.members, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(c.left, (std::vector<int>{3}));
    EXPECT_TRUE(c.joined.empty());
    // A lost connection fails at once; the agreement waits for the dead
    // replica's heartbeat to fall silent (300 ms) and connects again.
    EXPECT_LT(recovery_s[slot], 2.0) << c.describe();
  }
}

TEST(ReplicaGroup, TwoReplicasLostAtOnce) {
  comm::StoreServer server({.token = "t"});
  std::vector<float> means(4);
  std::vector<std::vector<MembershipChange>> changes(4);
  comm::testing::on_threads(4, [&](int slot) {
    comm::Store store = store_for(server, slot);
    auto g = std::make_unique<ReplicaGroup>(store, options(slot, 4));
    Replica r;
    r.step(*g, 1.0f);
    if (slot == 1 || slot == 3) {
      g.reset();
      return;
    }
    means[slot] = r.step(*g, static_cast<float>(slot + 1));
    changes[slot] = g->take_changes();
  });
  for (int slot : {0, 2}) {
    EXPECT_FLOAT_EQ(means[slot], 2.0f) << "(1 + 3) / 2";
    ASSERT_EQ(changes[slot].size(), 1u);
    EXPECT_EQ(changes[slot][0].members, (std::vector<int>{0, 2}));
    EXPECT_EQ(changes[slot][0].left, (std::vector<int>{1, 3}));
  }
}

TEST(ReplicaGroup, AReplicaThatStopsAnsweringIsLeftOutAndToldSoWhenItComesBack) {
  comm::StoreServer server({.token = "t"});
  std::vector<float> means(3);
  std::vector<double> seconds(3);
  std::string late_error;
  comm::testing::on_threads(3, [&](int slot) {
    comm::Store store = store_for(server, slot);
    ReplicaGroup g(store, options(slot, 3));
    Replica r;
    r.step(g, 1.0f);
    if (slot == 2) {
      // Alive (its heartbeat goes on) but silent: the others time out (2 s)
      // and then wait up to the timeout again for it to check in.
      std::this_thread::sleep_for(4500ms);
      try {
        r.step(g, 1.0f);
      } catch (const PeerError& e) {
        late_error = e.what();
      }
      return;
    }
    const auto t0 = Clock::now();
    means[slot] = r.step(g, static_cast<float>(slot + 1));
    seconds[slot] = std::chrono::duration<double>(Clock::now() - t0).count();
  });
  for (int slot : {0, 1}) {
    EXPECT_FLOAT_EQ(means[slot], 1.5f);
    EXPECT_LT(seconds[slot], 2 * 2.0 + 1.0) << "within twice the collective timeout (and the backstop)";
  }
  EXPECT_NE(late_error.find("replica 2 was left out of membership epoch 1 (members [0, 1])"), std::string::npos)
      << late_error;
}

TEST(ReplicaGroup, AReplacementIsAdmittedReceivesTheStateAndTakesPart) {
  comm::StoreServer server({.token = "t"});
  constexpr int64_t kSteps = 200;
  std::vector<Replica> replicas(4);
  std::vector<std::vector<MembershipChange>> changes(4);
  std::atomic<bool> lost{false};
  comm::testing::on_threads(4, [&](int thread) {
    if (thread == 3) {  // the replacement for slot 2, started once slot 2 is gone
      while (!lost.load()) std::this_thread::sleep_for(5ms);
      std::this_thread::sleep_for(200ms);
      comm::Store store = store_for(server, 2);
      ReplicaGroup g(store, options(2, 3, /*joining=*/true));
      Replica& r = replicas[3];
      r.connect(g);
      EXPECT_TRUE(g.join());
      EXPECT_GT(r.position, 3);
      while (r.position < kSteps) r.step(g, 2.0f);
      changes[3] = g.take_changes();
      return;
    }
    const int slot = thread;
    comm::Store store = store_for(server, slot);
    auto g = std::make_unique<ReplicaGroup>(store, options(slot, 3));
    Replica& r = replicas[slot];
    r.connect(*g);
    while (r.position < kSteps) {
      if (slot == 2 && r.position == 3) {
        g.reset();
        lost = true;
        return;
      }
      r.step(*g, slot == 0 ? 0.0f : 2.0f);
      std::this_thread::sleep_for(10ms);
    }
    changes[slot] = g->take_changes();
  });
  // Every replica ends at the same step with the same weights: the
  // replacement took the members' state and every later average with them.
  for (int i : {1, 3}) {
    EXPECT_EQ(replicas[i].position, kSteps);
    EXPECT_EQ(replicas[i].weights, replicas[0].weights) << "replica " << i;
  }
  ASSERT_EQ(changes[0].size(), 2u);
  EXPECT_EQ(changes[0][0].left, (std::vector<int>{2}));
  EXPECT_EQ(changes[0][1].joined, (std::vector<int>{2}));
  EXPECT_EQ(changes[0][1].members, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(changes[0][1].source, 0);
  EXPECT_EQ(changes[0][1].received, (std::vector<int>{2}));
  ASSERT_EQ(changes[3].size(), 1u);
  EXPECT_EQ(changes[3][0].joined, (std::vector<int>{2}));
  // After the join the mean is (0 + 2 + 2) / 3, before it (0 + 2) / 2: the
  // weights moved by both, so a replica that missed either would differ.
  EXPECT_LT(replicas[0].weights[0], -(kSteps - 3) * 1.0f + 0.01f);
}

TEST(ReplicaGroup, ASurvivorBehindTheOthersTakesTheStateOfOneAheadInsteadOfRedoingTheStep) {
  // A ring all-reduce can complete on some ranks and fail on others (the lost
  // rank's last messages reached some): replica 0 applied step 5, replica 1
  // did not. The agreement sees positions 5 and 4; replica 1 loads replica
  // 0's state and skips its update, and both go on equal.
  comm::StoreServer server({.token = "t"});
  std::vector<Replica> replicas(3);
  std::vector<float> first(3);
  std::vector<std::vector<MembershipChange>> changes(3);
  comm::testing::on_threads(3, [&](int slot) {
    comm::Store store = store_for(server, slot);
    auto g = std::make_unique<ReplicaGroup>(store, options(slot, 3));
    Replica& r = replicas[slot];
    r.connect(*g);
    for (int i = 0; i < 4; ++i) r.step(*g, static_cast<float>(slot));
    if (slot == 2) {
      g.reset();
      return;
    }
    if (slot == 0) {  // its all-reduce of step 5 completed: it applied a mean of 1
      for (float& w : r.weights) w -= 1.0f;
      ++r.position;
    }
    first[slot] = r.step(*g, 3.0f);
    while (r.position < 10) r.step(*g, 3.0f);
    changes[slot] = g->take_changes();
  });
  EXPECT_TRUE(std::isnan(first[1])) << "replica 1 skipped its update of step 5";
  EXPECT_FLOAT_EQ(first[0], 3.0f);
  EXPECT_EQ(replicas[1].position, 10);
  EXPECT_EQ(replicas[1].weights, replicas[0].weights);
  EXPECT_FLOAT_EQ(replicas[0].weights[0], -(4 * 1.0f + 1.0f + 5 * 3.0f));
  ASSERT_EQ(changes[0].size(), 1u);
  EXPECT_EQ(changes[0][0].step, 5);
  EXPECT_EQ(changes[0][0].source, 0);
  EXPECT_EQ(changes[0][0].received, (std::vector<int>{1}));
}

TEST(ReplicaGroup, AReplacementThatComesAfterTheMembersFinishedIsToldSo) {
  comm::StoreServer server({.token = "t"});
  comm::testing::on_threads(2, [&](int slot) {
    comm::Store store = store_for(server, slot);
    ReplicaGroup g(store, options(slot, 2));
    Replica r;
    r.step(g, 1.0f);
    g.finish();
  });
  comm::Store store = store_for(server, 1);
  ReplicaGroup late(store, options(1, 2, /*joining=*/true));
  const auto t0 = Clock::now();
  EXPECT_FALSE(late.join());
  EXPECT_LT(Clock::now() - t0, 1s) << "at once, not after the timeout";
}

TEST(ReplicaGroup, AJoinerOfAnotherConfigurationIsRefusedWithBothDigests) {
  comm::StoreServer server({.token = "t"});
  comm::Store store = store_for(server, 0);
  store.set("ft/config", "abc");  // what member 0 publishes when the job starts
  ReplicaGroupOptions o = options(1, 2, /*joining=*/true);
  o.config_hash = "xyz";
  ReplicaGroup joiner(store, o);
  try {
    joiner.join();
    FAIL() << "admitted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("digest is xyz and the job's members run abc"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid::parallel::fault_tolerance
