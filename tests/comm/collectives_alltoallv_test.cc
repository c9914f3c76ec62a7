// alltoallv (blocks of different sizes, empty ones included) over the
// in-process, shm and tcp transports at world sizes 1-8: every rank's blocks
// arrive at the rank they were meant for, in rank order, against what each
// sender wrote; the counts exchanged first by an alltoall, as expert
// parallelism does (braid/parallel/expert_parallel/); and its argument checks.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>

#include "braid/comm/store/server.h"
#include "braid/comm/transport/registry.h"
#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

using namespace std::chrono_literals;

// Elements rank `from` sends rank `to` in pattern k: empty blocks, one-element
// blocks, everything to one rank, and blocks of several KiB.
size_t count(int k, int from, int to) {
  switch (k) {
    case 0: return static_cast<size_t>((from + 2 * to) % 3 == 0 ? 0 : 1 + from + 3 * to);
    case 1: return static_cast<size_t>(from == to ? 0 : 1);
    case 2: return static_cast<size_t>(to == 0 ? 7 + from : 0);
    case 3: return static_cast<size_t>(1500 + 311 * from + 97 * to);
    default: return 0;
  }
}

int64_t value(int from, int to, size_t i) { return from * 10000000 + to * 100000 + static_cast<int64_t>(i); }

void check_alltoallv(int r, int p, Communicator& comm) {
  for (int k = 0; k < 4; ++k) {
    // The send counts are this rank's own; the receive counts come from an alltoall of them.
    std::vector<int64_t> send_counts(p), recv_counts(p);
    for (int j = 0; j < p; ++j) send_counts[j] = static_cast<int64_t>(count(k, r, j));
    comm.alltoall(send_counts, recv_counts).wait(Deadline::after(60s));
    std::vector<size_t> s(p), rc(p);
    std::vector<int64_t> in, out;
    for (int j = 0; j < p; ++j) {
      s[j] = static_cast<size_t>(send_counts[j]);
      rc[j] = static_cast<size_t>(recv_counts[j]);
      ASSERT_EQ(rc[j], count(k, j, r));
      for (size_t i = 0; i < s[j]; ++i) in.push_back(value(r, j, i));
    }
    size_t total = 0;
    for (size_t c : rc) total += c;
    out.assign(total, -1);
    comm.alltoallv(in, out, s, rc).wait(Deadline::after(60s));
    size_t at = 0;
    for (int j = 0; j < p; ++j)
      for (size_t i = 0; i < rc[j]; ++i) ASSERT_EQ(out[at++], value(j, r, i)) << "pattern " << k << " from " << j;
  }
}

class AlltoallvInproc : public ::testing::TestWithParam<int> {};

TEST_P(AlltoallvInproc, UnevenAndEmptyBlocks) {
  const int p = GetParam();
  run_world(p, [&](int r, Communicator& comm) { check_alltoallv(r, p, comm); });
}

INSTANTIATE_TEST_SUITE_P(Worlds, AlltoallvInproc, ::testing::Range(1, 9));

class AlltoallvTransports : public ::testing::TestWithParam<std::tuple<std::string, int>> {
 protected:
  StoreServer server{{.token = "tok"}};
};

TEST_P(AlltoallvTransports, UnevenAndEmptyBlocks) {
  const auto [name, p] = GetParam();
  Group group = make_thread_group(p, [&](int r) {
    Store store({.port = server.port(), .token = "tok", .who = fmt::format("rank {}", r)});
    return make_transport(name, &store,
                          {.rank = r, .size = p, .token = "tok", .prefix = fmt::format("a2av{}", p),
                           .shm_ring_bytes = 1 << 16, .connect_timeout = 10000ms});
  });
  std::vector<Communicator> comms;
  // The group owns the transports and closes them together, after the communicators are gone.
  for (int r = 0; r < p; ++r) comms.emplace_back(std::shared_ptr<Transport>(group[r].get(), [](Transport*) {}));
  on_threads(p, [&](int r) { check_alltoallv(r, p, comms[r]); });
}

INSTANTIATE_TEST_SUITE_P(Worlds, AlltoallvTransports,
                         ::testing::Combine(::testing::Values("shm", "tcp"), ::testing::Range(1, 9)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + std::to_string(std::get<1>(info.param));
                         });

TEST(AlltoallvArgs, RefusesCountsThatDoNotMatch) {
  run_world(2, [&](int, Communicator& comm) {
    std::vector<float> in(3), out(5);
    EXPECT_THROW(comm.alltoallv(in, out, {3}, {2, 3}), ValueError);        // one send count for two ranks
    EXPECT_THROW(comm.alltoallv(in, out, {1, 1}, {2, 3}), ValueError);     // in is not the sum
    EXPECT_THROW(comm.alltoallv(in, out, {1, 2}, {2, 2}), ValueError);     // out is not the sum
  });
}

}  // namespace
}  // namespace braid::comm::testing
