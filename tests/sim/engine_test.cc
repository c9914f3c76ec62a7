// The simulator on cases small enough to work out by hand: one message, two
// sharing a link, one joining halfway, processor sharing, stream order,
// joins, the per-rank breakdown, the trace, and the bad inputs it refuses.
#include "braid/sim/engine.h"

#include <gtest/gtest.h>

#include <map>

#include "braid/base/error.h"
#include "braid/base/rng.h"

namespace braid::sim {
namespace {

constexpr double kAlpha = 1e-3, kBeta = 1e-9;  // 1 ms, 1 GB/s

// `ranks` ranks, `per_host` per host, every link kAlpha/kBeta and no gamma.
Cluster cluster(int ranks, int per_host, double cores = 64) {
  Cluster c;
  c.ranks = ranks;
  c.ranks_per_host = per_host;
  c.cores_per_host = cores;
  c.intra = c.inter = {.alpha = kAlpha, .beta = kBeta, .gamma = 0};
  return c;
}

void expect_close(double got, double want) { EXPECT_NEAR(got, want, 1e-12 * std::abs(want)) << "want " << want; }

TEST(SimEngine, OneMessageTakesAlphaPlusBytesBeta) {
  Cluster c = cluster(2, 1);
  c.inter = {.alpha = 25e-6, .beta = 1 / 1.25e9, .gamma = 0};
  Simulator sim(c);
  const TaskId t = sim.transfer(0, 1, 1e6, {}, {"net", "m"});
  const SimResult r = sim.run();
  expect_close(sim.times(t).ready, 0);
  expect_close(sim.times(t).start, 25e-6);
  expect_close(sim.times(t).end, 25e-6 + 1e6 / 1.25e9);
  expect_close(r.makespan, sim.times(t).end);
  EXPECT_EQ(r.tasks, 1);
}

TEST(SimEngine, InsideAHostAMessageUsesTheInHostLink) {
  Cluster c = cluster(2, 2);
  c.intra = {.alpha = 3e-6, .beta = 1 / 8e9, .gamma = 0};
  Simulator sim(c);
  const TaskId t = sim.transfer(0, 1, 1e6, {}, {"net", "m"});
  sim.run();
  expect_close(sim.times(t).end, 3e-6 + 1e6 / 8e9);
}

TEST(SimEngine, AnEmptyMessageCostsItsLatency) {
  Simulator sim(cluster(2, 1));
  const TaskId t = sim.transfer(0, 1, 0, {}, {"net", "m"});
  sim.run();
  expect_close(sim.times(t).end, kAlpha);
}

TEST(SimEngine, TwoMessagesThroughOneInterfaceTakeTwiceAsLong) {
  // Ranks 0, 1 on host 0 send to ranks 2, 3 on host 1: both share host 0's
  // interface out and host 1's in. Rank 2 -> 3 stays inside host 1 and is
  // not slowed.
  Simulator sim(cluster(4, 2));
  const double n = 1e6;
  const TaskId a = sim.transfer(0, 2, n, {}, {"net", "a"});
  const TaskId b = sim.transfer(1, 3, n, {}, {"net", "b"});
  const TaskId inside = sim.transfer(2, 3, n, {}, {"net", "inside"});
  sim.run();
  expect_close(sim.times(a).end, kAlpha + 2 * n * kBeta);
  expect_close(sim.times(b).end, kAlpha + 2 * n * kBeta);
  expect_close(sim.times(inside).end, kAlpha + n * kBeta);
}

TEST(SimEngine, AMessageJoiningHalfwayReshares) {
  // A: 0 -> 1, 1 GB, streams from 1 ms. B: 0 -> 2, 1 GB, ready at 0.5 s
  // (after a compute task), streams from 0.501 s through host 0's interface,
  // which A has had alone for 0.5 s. From then both get 0.5 GB/s: A's last
  // 0.5 GB take 1 s (ends 1.501); B has 0.5 GB left at full speed (2.001).
  // C: 3 -> 4 on other hosts, unaffected.
  Simulator sim(cluster(5, 1));
  const TaskId a = sim.transfer(0, 1, 1e9, {}, {"net", "a"});
  const TaskId wait = sim.compute(0, 0.5, {}, {"forward", "f"});
  const TaskId b = sim.transfer(0, 2, 1e9, {wait}, {"net", "b"});
  const TaskId c = sim.transfer(3, 4, 1e9, {}, {"net", "c"});
  sim.run();
  expect_close(sim.times(b).ready, 0.5);
  expect_close(sim.times(b).start, 0.501);
  expect_close(sim.times(a).end, 1.501);
  expect_close(sim.times(b).end, 2.001);
  expect_close(sim.times(c).end, 1.001);
}

TEST(SimEngine, ComputeSharesAHostsCores) {
  // 1, 2 and 3 s of single-thread work on a 2-core host: all three at 2/3
  // speed until the first is done (1.5 s), then two at full speed: the
  // second has 1 s left (2.5 s), the third 2 s, then 1 s alone (3.5 s).
  Simulator sim(cluster(3, 3, /*cores=*/2));
  const TaskId a = sim.compute(0, 1, {}, {"forward", "a"});
  const TaskId b = sim.compute(1, 2, {}, {"forward", "b"});
  const TaskId c = sim.compute(2, 3, {}, {"forward", "c"});
  sim.run();
  expect_close(sim.times(a).end, 1.5);
  expect_close(sim.times(b).end, 2.5);
  expect_close(sim.times(c).end, 3.5);
}

TEST(SimEngine, ThreadsCountTowardsTheCores) {
  // 2 + 1 threads on 2 cores: both at 2/3 speed. One host per rank does not share.
  Simulator sim(cluster(3, 2, /*cores=*/2));
  const TaskId wide = sim.compute(0, 1, {}, {"forward", "wide"}, 0, 2);
  const TaskId narrow = sim.compute(1, 1, {}, {"forward", "narrow"});
  const TaskId alone = sim.compute(2, 1, {}, {"forward", "alone"}, 0, 2);
  sim.run();
  expect_close(sim.times(wide).end, 1.5);
  expect_close(sim.times(narrow).end, 1.5);
  expect_close(sim.times(alone).end, 1);
}

TEST(SimEngine, AMessagesCpuSharesTheHostWithCompute) {
  // One host of 1 core. The message (1 MB at 1 GB/s, each end busy half the
  // time: 0.5 ns/B) streams from 1 ms; its ends then ask for 2 x 0.5 cores
  // beside the 2 ms compute task's 1: both at half speed. The task has 1 ms
  // left (done at 3 ms), the message its 1 ms (also 3 ms).
  Cluster c = cluster(2, 2, /*cores=*/1);
  c.intra_cpu = {.per_message = 0, .per_byte = 0.5e-9};
  Simulator sim(c);
  const TaskId work = sim.compute(0, 2e-3, {}, {"forward", "f"});
  const TaskId m = sim.transfer(0, 1, 1e6, {}, {"net", "m"});
  sim.run();
  expect_close(sim.times(m).start, 1e-3);
  expect_close(sim.times(work).end, 3e-3);
  expect_close(sim.times(m).end, 3e-3);

  // Without CPU costs the same message ignores the busy host (the network copies).
  Simulator free(cluster(2, 2, /*cores=*/1));
  free.compute(0, 2e-3, {}, {"forward", "f"});
  const TaskId m2 = free.transfer(0, 1, 1e6, {}, {"net", "m"});
  free.run();
  expect_close(free.times(m2).end, 2e-3);
}

TEST(SimEngine, AMessageCannotOutrunOneThreadPerEnd) {
  // 2 ns of CPU per byte at each end on a 1 GB/s link: the copy, not the
  // link, sets the pace (2 ms for 1 MB), with cores to spare.
  Cluster c = cluster(2, 2, /*cores=*/4);
  c.intra_cpu = {.per_message = 0, .per_byte = 2e-9};
  Simulator sim(c);
  const TaskId big = sim.transfer(0, 1, 1e6, {}, {"net", "big"});
  sim.run();
  expect_close(sim.times(big).end, kAlpha + 2e-3);
  // A per-message overhead: 1 ms of CPU for 1000 bytes is the message's time.
  c.intra_cpu = {.per_message = 1e-3, .per_byte = 0};
  Simulator small(c);
  const TaskId m = small.transfer(0, 1, 1000, {}, {"net", "small"});
  small.run();
  expect_close(small.times(m).end, kAlpha + 1e-3);
}

// Rank 1 finishes A at 1 s and waits for a message it polls for 0.5 s before
// it sleeps; waking costs 2 s. Sent at 1.2 s it finds rank 1 still polling;
// sent at 2 s, asleep; sent while rank 1 still computes, busy. A message
// nobody waits for by itself (a collective's) never wakes anyone.
TEST(SimEngine, AnAwaitedMessageWakesItsReceiverOnlyPastItsPoll) {
  Cluster c = cluster(2, 2);
  c.intra.alpha = 0;  // an empty message: arrives as soon as it is sent
  c.poll = 0.5;
  c.intra_wake = 2;
  auto play = [&](double send_at, double receiver_busy, bool awaited) {
    Simulator sim(c);
    const TaskId a = sim.compute(1, receiver_busy, {}, {"forward", "A"});
    const TaskId s = sim.compute(0, send_at, {}, {"forward", "S"});
    const TaskId m = sim.transfer(0, 1, 0, {s}, {"net", "act"}, awaited);
    const TaskId b = sim.compute(1, 1, {m}, {"forward", "B"});
    sim.run();
    EXPECT_GE(sim.times(b).start, sim.times(a).end);
    return sim.times(b).start;
  };
  expect_close(play(1.2, 1, true), 1.2);      // waited 0.2 s: still polling
  expect_close(play(2, 1, true), 2 + 2);      // waited 1 s: asleep, woken
  expect_close(play(1.4, 1, true), 1.4);      // waited 0.4 s: polling
  expect_close(play(1, 3, true), 3);          // arrived while rank 1 computed
  expect_close(play(2, 1, false), 2);         // a collective's message: no wake-up
}

TEST(SimEngine, ADelayStartsWhatFollowsLateAndCountsAsAWait) {
  Simulator sim(cluster(2, 2, /*cores=*/1));
  const TaskId late = sim.delay(2, {});
  const TaskId a = sim.compute(0, 1, {late}, {"forward", "A"});
  const TaskId b = sim.compute(1, 3, {}, {"forward", "B"});  // alone on the core until A starts
  const SimResult r = sim.run();
  expect_close(sim.times(a).start, 2);
  expect_close(sim.times(a).end, 2 + 2);  // shares the one core with B for its 1 s of work
  expect_close(sim.times(b).end, 4);
  expect_close(r.ranks[0].waits, 2);
  expect_close(r.ranks[0].compute, 2);
  EXPECT_THROW(sim.delay(-1, {}), ValueError);
}

TEST(SimEngine, AStreamRunsItsTasksInTheOrderTheyWereAdded) {
  // Stream 0 of rank 0: `late` waits on a message (done at 1.001 s), `free`
  // waits on nothing but comes after `late`. Stream 1 runs beside them.
  Simulator sim(cluster(2, 1));
  const TaskId m = sim.transfer(1, 0, 1e9, {}, {"net", "m"});
  const TaskId late = sim.compute(0, 1, {m}, {"forward", "late"});
  const TaskId free = sim.compute(0, 1, {}, {"forward", "free"});
  const TaskId side = sim.compute(0, 1, {}, {"comm", "side"}, 1);
  sim.run();
  expect_close(sim.times(late).start, 1.001);
  expect_close(sim.times(free).ready, 0);
  expect_close(sim.times(free).start, 2.001);
  expect_close(sim.times(free).end, 3.001);
  expect_close(sim.times(side).start, 0);
}

TEST(SimEngine, JoinsEndWithTheirLastDependency) {
  Simulator sim(cluster(2, 1));
  const TaskId a = sim.compute(0, 1, {}, {"forward", "a"});
  const TaskId b = sim.compute(1, 2, {}, {"forward", "b"});
  const TaskId j = sim.join({a, b});
  const TaskId empty = sim.join({});
  const TaskId after = sim.compute(0, 1, {j, empty}, {"forward", "after"});
  sim.run();
  expect_close(sim.times(j).end, 2);
  expect_close(sim.times(empty).end, 0);
  expect_close(sim.times(after).end, 3);
}

TEST(SimEngine, RunningTwiceGivesTheSameTimes) {
  Simulator sim(cluster(4, 2, 1));
  std::vector<TaskId> ids;
  for (int r = 0; r < 4; ++r) ids.push_back(sim.compute(r, 0.1 * (r + 1), {}, {"forward", "f"}));
  for (int r = 0; r < 4; ++r) ids.push_back(sim.transfer(r, (r + 1) % 4, 1e6 * (r + 1), {ids[r]}, {"net", "m"}));
  const SimResult first = sim.run();
  std::vector<double> ends;
  for (TaskId t : ids) ends.push_back(sim.times(t).end);
  const SimResult second = sim.run();
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(sim.times(ids[i]).end, ends[i]);
  EXPECT_EQ(first.makespan, second.makespan);
  EXPECT_EQ(first.events, second.events);
}

// Rank 0 computes A (1 s), sends to rank 1 (0.5 s: 0.1 s latency + 0.4 s),
// computes C (2 s). Rank 1 runs B after the message: idle 1.5 s, 1 s of it
// waiting for rank 0's A (a wait) and 0.5 s for the message (exposed
// communication). Then D after rank 0's C (idle 0.5 s: a wait), then E on its
// communication stream (a 1 s tail: exposed communication). Then F after a
// join of a message and rank 0's G, which ended last (a wait).
TEST(SimEngine, BreakdownBlamesWhatEachGapWaitedOn) {
  Cluster c = cluster(2, 1);
  c.inter = {.alpha = 0.1, .beta = 0.4 / 1e6, .gamma = 0};
  Simulator sim(c);
  const TaskId a = sim.compute(0, 1, {}, {"forward", "A"});
  const TaskId t = sim.transfer(0, 1, 1e6, {a}, {"net", "act"});
  const TaskId b = sim.compute(1, 1, {t}, {"forward", "B"});
  const TaskId cc = sim.compute(0, 2, {a}, {"forward", "C"});
  const TaskId d = sim.compute(1, 0.5, {cc}, {"forward", "D"});
  sim.compute(1, 1, {d}, {"comm", "E"}, 1);
  SimResult r = sim.run();
  expect_close(sim.times(b).start, 1.5);
  expect_close(sim.times(d).start, 3);

  const RankBreakdown& r0 = r.ranks[0];
  expect_close(r0.end, 3);
  expect_close(r0.compute, 3);
  expect_close(r0.exposed_comm, 0);
  expect_close(r0.waits, 0);
  const RankBreakdown& r1 = r.ranks[1];
  expect_close(r1.end, 4.5);
  expect_close(r1.compute, 1.5);
  expect_close(r1.exposed_comm, 0.5 + 1);
  expect_close(r1.waits, 1 + 0.5);

  // F: waits on join(message at 3.5 s, G on rank 0 at 6 s).
  const TaskId g = sim.compute(0, 3, {cc}, {"backward", "G"});
  const TaskId m2 = sim.transfer(0, 1, 1e6, {cc}, {"net", "act2"});
  const TaskId f = sim.compute(1, 1, {sim.join({m2, g})}, {"backward", "F"});
  r = sim.run();
  expect_close(sim.times(f).start, 6);
  expect_close(r.ranks[1].waits, 1 + 0.5 + (6 - 3.5));
  for (const RankBreakdown& k : r.ranks) EXPECT_NEAR(k.compute + k.exposed_comm + k.waits, k.end, 1e-9);
}

// Random graphs on 4 ranks of 2 hosts of 2 cores: every task starts once its
// dependencies (and, on a stream, the task before it) are done, and each
// rank's breakdown adds up to its end.
TEST(SimEngine, RandomGraphsKeepOrderAndTheBreakdownAddsUp) {
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Generator g(seed);
    Cluster c = cluster(4, 2, /*cores=*/2);
    if (seed % 2 == 1) {  // messages that cost CPU, and wake-ups: rates coupled through the hosts
      c.intra_cpu = {.per_message = 1e-3, .per_byte = 0.5e-9};
      c.inter_cpu = {.per_message = 2e-3, .per_byte = 2e-9};
      c.intra_wake = c.inter_wake = 5e-3;
    }
    Simulator sim(c);
    struct Added {
      std::vector<TaskId> deps;
      TaskId stream_prev;
    };
    std::vector<Added> added;
    std::map<std::pair<int, int>, TaskId> last;  // (rank, stream) -> task
    for (int i = 0; i < 300; ++i) {
      std::vector<TaskId> deps;
      for (uint64_t k = g.below(4); k > 0 && i > 0; --k) deps.push_back(static_cast<TaskId>(g.below(i)));
      const int rank = static_cast<int>(g.below(4)), kind = static_cast<int>(g.below(3));
      TaskId prev = -1, id;
      if (kind == 0) {
        const int stream = static_cast<int>(g.below(2));
        auto it = last.find({rank, stream});
        if (it != last.end()) prev = it->second;
        id = sim.compute(rank, g.uniform_f64(), deps, {"forward", "c"}, stream, 1.0 + static_cast<double>(g.below(2)));
        last[{rank, stream}] = id;
      } else if (kind == 1) {
        id = sim.transfer(rank, static_cast<int>(g.below(4)), 1e9 * g.uniform_f64(), deps, {"net", "t"},
                          g.below(2) == 1);
      } else {
        id = sim.join(deps);
      }
      ASSERT_EQ(id, i);
      added.push_back({deps, prev});
    }
    const SimResult r = sim.run();
    for (int i = 0; i < 300; ++i) {
      const TaskTimes& t = sim.times(i);
      double ready = 0;
      for (TaskId d : added[i].deps) ready = std::max(ready, sim.times(d).end);
      EXPECT_EQ(t.ready, ready) << "seed " << seed << " task " << i;
      EXPECT_GE(t.start, t.ready);
      if (added[i].stream_prev >= 0) {
        EXPECT_GE(t.start, sim.times(added[i].stream_prev).end);
      }
      EXPECT_GE(t.end, t.start);
    }
    for (const RankBreakdown& k : r.ranks) {
      EXPECT_NEAR(k.compute + k.exposed_comm + k.waits, k.end, 1e-9) << "seed " << seed;
      EXPECT_GE(k.exposed_comm, 0);
      EXPECT_GE(k.waits, 0);
    }
  }
}

TEST(SimEngine, TraceLooksLikeAMeasuredTimeline) {
  Simulator sim(cluster(2, 1));
  const TaskId a = sim.compute(0, 1, {}, {"forward", "F0"});
  sim.transfer(0, 1, 1e6, {a}, {"net", "act"});
  sim.compute(1, 0.5, {}, {"comm", "encode"}, 1);
  sim.run();
  const nlohmann::json j = sim.to_trace(0.5);
  EXPECT_EQ(j["displayTimeUnit"], "ms");
  std::map<std::pair<int, int>, std::string> threads;
  std::map<int, std::string> processes;
  std::vector<nlohmann::json> spans;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      spans.push_back(e);
      continue;
    }
    const std::string name = e["args"].value("name", "");
    if (e["name"] == "thread_name") threads[{e["pid"].get<int>(), e["tid"].get<int>()}] = name;
    if (e["name"] == "process_name") processes[e["pid"].get<int>()] = name;
  }
  EXPECT_EQ(processes[0], "rank 0");
  EXPECT_EQ(processes[1], "rank 1");
  EXPECT_EQ((threads[{0, 0}]), "train");
  EXPECT_EQ((threads[{0, 100}]), "net");
  EXPECT_EQ((threads[{1, 1}]), "comm");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0]["name"], "F0");
  EXPECT_EQ(spans[0]["cat"], "forward");
  EXPECT_DOUBLE_EQ(spans[0]["ts"].get<double>(), -0.5e6);
  EXPECT_DOUBLE_EQ(spans[0]["dur"].get<double>(), 1e6);
  EXPECT_EQ(spans[1]["tid"], 100);
  EXPECT_EQ(spans[1]["pid"], 0);
  EXPECT_EQ(spans[1]["args"]["bytes"], 1e6);
  EXPECT_DOUBLE_EQ(spans[1]["ts"].get<double>(), 0.5e6);  // sent at 1 s, latency included
  EXPECT_NEAR(spans[1]["dur"].get<double>(), (kAlpha + 1e6 * kBeta) * 1e6, 1e-6);
}

TEST(SimEngine, StreamsPastTheNetRowAreTracedBelowIt) {
  // A parameter server serves each of its W workers on a stream of its own.
  Simulator sim(cluster(2, 1));
  const TaskId a = sim.compute(0, 1, {}, {"comm", "reply w148"}, 150);
  const TaskId b = sim.compute(0, 1, {}, {"comm", "reply w149"}, 150);
  sim.transfer(0, 1, 1e6, {a}, {"net", "pull"});
  sim.run();
  expect_close(sim.times(b).end, 2);  // one stream: one after the other
  std::map<int, std::string> threads;
  std::vector<int> tids;
  const nlohmann::json trace = sim.to_trace();
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 0) threads[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X" && e["pid"] == 0) tids.push_back(e["tid"].get<int>());
  }
  EXPECT_EQ(threads[100], "net");
  EXPECT_EQ(threads[151], "stream 150");
  EXPECT_EQ(tids, (std::vector<int>{151, 151, 100}));
}

TEST(SimEngine, BadInputsAreValueErrors) {
  Simulator sim(cluster(2, 1));
  const TaskId a = sim.compute(0, 1, {}, {"forward", "a"});
  EXPECT_THROW(sim.compute(0, -1, {}, {"forward", "x"}), ValueError);
  EXPECT_THROW(sim.compute(2, 1, {}, {"forward", "x"}), ValueError);
  EXPECT_THROW(sim.compute(0, 1, {}, {"forward", "x"}, -1), ValueError);
  EXPECT_THROW(sim.compute(0, 1, {}, {"forward", "x"}, 0, 0), ValueError);
  EXPECT_THROW(sim.transfer(0, 1, -5, {}, {"net", "x"}), ValueError);
  EXPECT_THROW(sim.transfer(0, 7, 5, {}, {"net", "x"}), ValueError);
  EXPECT_THROW(sim.join({a + 1}), ValueError);
  EXPECT_THROW(sim.join({-1}), ValueError);
  EXPECT_THROW(sim.times(a + 1), IndexError);
  try {
    sim.transfer(0, 1, 5, {a, 9}, {"net", "act m3"});
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("act m3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sim.size(), 1);  // the refused tasks were not added
  Cluster bad = cluster(2, 1);
  bad.slowdown = {1, 1, 1};
  EXPECT_THROW(Simulator{bad}, ValueError);
}

}  // namespace
}  // namespace braid::sim
