// broadcast, reduce, reduce_scatter, allgather, gather, scatter, alltoall,
// barrier and send/recv over world sizes 1-9, against closed-form results.
#include <gtest/gtest.h>

#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

const Deadline kWait() { return Deadline::after(60s); }

class Ops : public ::testing::TestWithParam<int> {};

// Element i of rank r's block for rank j: distinct everywhere.
int64_t value(int r, int j, size_t i) { return r * 1000000 + j * 1000 + static_cast<int64_t>(i); }

TEST_P(Ops, BroadcastAndReduceFromEveryRoot) {
  const int p = GetParam();
  run_world(p, [&](int r, Communicator& comm) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{4099}}) {
      for (int root = 0; root < p; ++root) {
        std::vector<int64_t> b(n, r == root ? 42 + root : -1);
        comm.broadcast(b, {.root = root}).wait(kWait());
        for (int64_t v : b) ASSERT_EQ(v, 42 + root);
        for (Op op : kOps) {
          std::vector<double> x(n);
          for (size_t i = 0; i < n; ++i) x[i] = input_value(op, r, i);
          comm.reduce(x, {.root = root, .op = op}).wait(kWait());
          if (r == root) {
            for (size_t i = 0; i < n; ++i) ASSERT_NEAR(x[i], reference<double>(op, p, i), 1e-12) << name(op);
          }
        }
      }
    }
  });
}

TEST_P(Ops, ReduceScatterAndAllgather) {
  const int p = GetParam();
  run_world(p, [&](int r, Communicator& comm) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}}) {
      for (Op op : kOps) {
        std::vector<float> in(n * p), out(n, -7);
        for (int j = 0; j < p; ++j)
          for (size_t i = 0; i < n; ++i) in[j * n + i] = static_cast<float>(input_value(op, r, j * n + i));
        const std::vector<float> before = in;
        comm.reduce_scatter(in, out, {.op = op}).wait(kWait());
        ASSERT_EQ(in, before) << "reduce_scatter must not modify its input";
        for (size_t i = 0; i < n; ++i)
          ASSERT_NEAR(out[i], reference<float>(op, p, r * n + i), 1e-5) << name(op) << " n=" << n;
      }
      std::vector<int64_t> mine(n), all(n * p, -1);
      for (size_t i = 0; i < n; ++i) mine[i] = value(r, 0, i);
      comm.allgather(mine, all).wait(kWait());
      for (int j = 0; j < p; ++j)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(all[j * n + i], value(j, 0, i));
    }
  });
}

TEST_P(Ops, GatherScatterAlltoall) {
  const int p = GetParam();
  run_world(p, [&](int r, Communicator& comm) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}}) {
      const int root = p / 2;
      std::vector<int64_t> mine(n), all(r == root ? n * p : 0);
      for (size_t i = 0; i < n; ++i) mine[i] = value(r, 0, i);
      comm.gather(mine, all, {.root = root}).wait(kWait());
      if (r == root) {
        for (int j = 0; j < p; ++j)
          for (size_t i = 0; i < n; ++i) ASSERT_EQ(all[j * n + i], value(j, 0, i));
      }

      std::vector<int64_t> src(r == root ? n * p : 0), got(n, -1);
      for (size_t k = 0; k < src.size(); ++k) src[k] = value(root, static_cast<int>(k / std::max<size_t>(n, 1)), k);
      comm.scatter(src, got, {.root = root}).wait(kWait());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], value(root, r, r * n + i));

      std::vector<int64_t> in(n * p), out(n * p, -1);
      for (int j = 0; j < p; ++j)
        for (size_t i = 0; i < n; ++i) in[j * n + i] = value(r, j, i);
      comm.alltoall(in, out).wait(kWait());
      for (int j = 0; j < p; ++j)
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[j * n + i], value(j, r, i));
    }
    comm.barrier().wait(kWait());
  });
}

TEST_P(Ops, SendRecvRingWithTags) {
  const int p = GetParam();
  if (p == 1) GTEST_SKIP() << "no peer";
  run_world(p, [&](int r, Communicator& comm) {
    std::vector<int32_t> out{r, r * 2}, out2{r + 100, 0}, in(2), in2(2);
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    Work a = comm.recv(in, prev, {.tag = 5});
    Work b = comm.recv(in2, prev, {.tag = 6});
    Work c = comm.send(out2, next, {.tag = 6});
    Work d = comm.send(out, next, {.tag = 5});
    wait_all({a, b, c, d}, kWait());
    EXPECT_EQ(in, (std::vector<int32_t>{prev, prev * 2}));
    EXPECT_EQ(in2[0], prev + 100);
  });
}

TEST_P(Ops, ManyCollectivesInFlightCompleteInOrder) {
  const int p = GetParam();
  run_world(p, [&](int r, Communicator& comm) {
    std::vector<std::vector<float>> bufs(16, std::vector<float>(33, static_cast<float>(r + 1)));
    std::vector<Work> works;
    for (auto& b : bufs) works.push_back(comm.allreduce(b));
    wait_all(works, kWait());
    for (auto& b : bufs) EXPECT_EQ(b[32], p * (p + 1) / 2.0f);
  });
}

TEST(OpsArgs, BadArgumentsAreValueErrors) {
  run_world(2, [&](int, Communicator& comm) {
    std::vector<float> a(4), b(3);
    EXPECT_THROW(comm.reduce_scatter(a, b), ValueError);
    EXPECT_THROW(comm.allgather(b, a), ValueError);
    EXPECT_THROW(comm.broadcast(a, {.root = 2}), ValueError);
    std::vector<uint8_t> u(4);
    EXPECT_THROW(comm.allreduce(u), ValueError);
    EXPECT_THROW(comm.send(a, 1, {.tag = 1ull << 40}), ValueError);
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, Ops, ::testing::Range(1, 10));

}  // namespace
}  // namespace braid::comm::testing
