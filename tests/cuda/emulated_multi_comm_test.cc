// Collectives on device buffers with ranks as threads, each rank's buffers on
// the emulated cuda device (braid/cuda/emulated/nccl.cc, braid/cuda/staged.h):
// the emulated NCCL against the host communicator's ring bit for bit, the
// staged path against the host communicator's own choice, at world sizes 1-4
// and sizes 0, 1, odd and larger; point-to-point; which path a call took; and
// a rank that never comes failing the others with rank, op, bytes and who is
// missing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "braid/base/rng.h"
#include "braid/comm/device_comm.h"
#include "braid/comm/tensor_buffer.h"
#include "braid/cuda/emulated.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid {
namespace {

using comm::DeviceComm;
using parallel::testing::on_ranks;

const Device kDevice = Device::cuda(0);

// Rank r's input: values over six decades, so a sum's order shows in its last bits.
std::vector<float> input(int r, size_t n) {
  Generator g(100 + static_cast<uint64_t>(r));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(g.normal() * std::pow(10.0, static_cast<double>(i % 7) - 3));
  return v;
}

// Sets the process's device path for one test and puts it back.
struct PathGuard {
  explicit PathGuard(DeviceComm m) {
    cuda::emulated::install_collectives();  // another test may have registered its own in their place
    comm::set_device_comm(m);
  }
  ~PathGuard() { comm::set_device_comm(DeviceComm::automatic); }
};

enum class Kind { allreduce, reduce_scatter, allgather, broadcast };

// Each rank's output of `kind` over `n` elements (per rank block for
// reduce_scatter and allgather), with the buffers on `device`.
std::vector<std::vector<float>> run(Kind kind, int world, size_t n, comm::Op op, Device device,
                                    comm::Algorithm algorithm = comm::Algorithm::automatic) {
  std::vector<std::vector<float>> got(static_cast<size_t>(world));
  on_ranks(world, [&](int r, comm::Communicator c) {
    const size_t p = static_cast<size_t>(world);
    const size_t in_n = kind == Kind::reduce_scatter ? n * p : n;
    const size_t out_n = kind == Kind::allgather ? n * p : kind == Kind::reduce_scatter ? n : in_n;
    const std::vector<float> v = input(r, in_n);
    Tensor in = Tensor::from_vector(v, {static_cast<int64_t>(in_n)}).to(device);
    Tensor out = kind == Kind::allreduce || kind == Kind::broadcast ? in : Tensor::zeros({static_cast<int64_t>(out_n)}).to(device);
    comm::Work w;
    switch (kind) {
      case Kind::allreduce: w = c.allreduce(comm::buffer_of(in), {.op = op, .algorithm = algorithm}); break;
      case Kind::reduce_scatter: w = c.reduce_scatter(comm::buffer_of(in), comm::buffer_of(out), {.op = op}); break;
      case Kind::allgather: w = c.allgather(comm::buffer_of(in), comm::buffer_of(out)); break;
      case Kind::broadcast: w = c.broadcast(comm::buffer_of(in), {.root = world - 1}); break;
    }
    w.wait(Deadline::after(std::chrono::seconds(30)));
    got[static_cast<size_t>(r)] = out.to_vector<float>();
  });
  return got;
}

void expect_same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b,
                      const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t r = 0; r < a.size(); ++r) {
    ASSERT_EQ(a[r].size(), b[r].size()) << where << " rank " << r;
    EXPECT_EQ(0, std::memcmp(a[r].data(), b[r].data(), a[r].size() * sizeof(float))) << where << " rank " << r;
  }
}

int64_t launches(const char* kernel) {
  const auto c = cuda::emulated::counters();
  const auto it = c.by_kernel.find(kernel);
  return it == c.by_kernel.end() ? 0 : it->second;
}

TEST(EmulatedNccl, CollectivesEqualTheHostRingBitForBit) {
  PathGuard path(DeviceComm::native);
  for (int world = 1; world <= 4; ++world) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1003}}) {
      for (comm::Op op : {comm::Op::sum, comm::Op::avg, comm::Op::max}) {
        const std::string where = fmt::format("world {} n {} op {}", world, n, comm::name(op));
        expect_same_bits(run(Kind::allreduce, world, n, op, kDevice),
                         run(Kind::allreduce, world, n, op, Device::cpu, comm::Algorithm::ring), "allreduce " + where);
        expect_same_bits(run(Kind::reduce_scatter, world, n, op, kDevice),
                         run(Kind::reduce_scatter, world, n, op, Device::cpu), "reduce_scatter " + where);
      }
      expect_same_bits(run(Kind::allgather, world, n, comm::Op::sum, kDevice),
                       run(Kind::allgather, world, n, comm::Op::sum, Device::cpu), fmt::format("allgather {} {}", world, n));
      expect_same_bits(run(Kind::broadcast, world, n, comm::Op::sum, kDevice),
                       run(Kind::broadcast, world, n, comm::Op::sum, Device::cpu), fmt::format("broadcast {} {}", world, n));
    }
  }
}

// The bit-for-bit check above can fail: summing in rank order, as a naive
// gather-then-reduce would, differs from the ring's order in the last bits.
TEST(EmulatedNccl, TheRingsOrderIsNotRankOrder) {
  const size_t n = 1003;
  std::vector<float> rank_order = input(0, n);
  for (int r = 1; r < 4; ++r) {
    const std::vector<float> v = input(r, n);
    for (size_t i = 0; i < n; ++i) rank_order[i] += v[i];
  }
  PathGuard path(DeviceComm::native);
  const std::vector<float> ring = run(Kind::allreduce, 4, n, comm::Op::sum, kDevice)[0];
  EXPECT_NE(0, std::memcmp(ring.data(), rank_order.data(), n * sizeof(float)));
}

TEST(EmulatedNccl, StagedEqualsTheHostAndCrossesThroughHostMemory) {
  PathGuard path(DeviceComm::staged);
  for (int world : {2, 3}) {
    for (size_t n : {size_t{1}, size_t{1003}}) {
      const std::string where = fmt::format("world {} n {}", world, n);
      const int64_t nccl_before = launches("allreduce");
      const int64_t host_before = cuda::emulated::counters().to_host_bytes;
      expect_same_bits(run(Kind::allreduce, world, n, comm::Op::avg, kDevice),
                       run(Kind::allreduce, world, n, comm::Op::avg, Device::cpu), "allreduce " + where);
      EXPECT_EQ(launches("allreduce"), nccl_before) << "the staged path launched the emulated NCCL";
      EXPECT_GE(cuda::emulated::counters().to_host_bytes - host_before, static_cast<int64_t>(2 * world * n * 4)) << where;
      expect_same_bits(run(Kind::reduce_scatter, world, n, comm::Op::sum, kDevice),
                       run(Kind::reduce_scatter, world, n, comm::Op::sum, Device::cpu), "reduce_scatter " + where);
      expect_same_bits(run(Kind::allgather, world, n, comm::Op::sum, kDevice),
                       run(Kind::allgather, world, n, comm::Op::sum, Device::cpu), "allgather " + where);
      expect_same_bits(run(Kind::broadcast, world, n, comm::Op::sum, kDevice),
                       run(Kind::broadcast, world, n, comm::Op::sum, Device::cpu), "broadcast " + where);
    }
  }
}

// Around a ring: each rank sends its vector to the next and receives the
// previous rank's, twice, first in first out.
TEST(EmulatedNccl, SendRecvOnEveryPath) {
  for (DeviceComm mode : {DeviceComm::native, DeviceComm::staged}) {
    PathGuard path(mode);
    for (int world : {2, 4}) {
      on_ranks(world, [&](int r, comm::Communicator c) {
        const int next = (r + 1) % world, prev = (r + world - 1) % world;
        Tensor a = Tensor::from_vector(input(r, 33), {33}).to(kDevice);
        Tensor b = Tensor::from_vector(input(r + 10, 5), {5}).to(kDevice);
        Tensor ra = Tensor::zeros({33}).to(kDevice), rb = Tensor::zeros({5}).to(kDevice);
        comm::Work s1 = c.send(comm::buffer_of(a), next), s2 = c.send(comm::buffer_of(b), next);
        comm::Work r1 = c.recv(comm::buffer_of(ra), prev), r2 = c.recv(comm::buffer_of(rb), prev);
        comm::wait_all({s1, s2, r1, r2}, Deadline::after(std::chrono::seconds(30)));
        EXPECT_EQ(ra.to_vector<float>(), input(prev, 33)) << comm::name(mode);
        EXPECT_EQ(rb.to_vector<float>(), input(prev + 10, 5)) << comm::name(mode);
      });
    }
  }
}

TEST(EmulatedNccl, AutomaticPicksNcclForThreadsSharingTheEmulatedGpu) {
  cuda::emulated::install_collectives();
  on_ranks(3, [&](int, comm::Communicator c) {
    EXPECT_EQ(comm::choose_device_comm(c, kDevice, DeviceComm::automatic), DeviceComm::native);
    EXPECT_EQ(comm::choose_device_comm(c, kDevice, DeviceComm::staged), DeviceComm::staged);
  });
  comm::set_device_comm(DeviceComm::automatic);
  EXPECT_EQ(comm::parse_device_comm("nccl"), DeviceComm::native);
  EXPECT_THROW(comm::parse_device_comm("gloo"), ValueError);
}

// Rank 1 never calls: rank 0's all-reduce fails within its timeout naming
// itself, the op, the bytes and the missing rank; the communicator stays
// aborted, as a real NCCL communicator does after ncclCommAbort.
TEST(EmulatedNccl, AMissingRankTimesOutNamingIt) {
  PathGuard path(DeviceComm::native);
  std::string message;
  on_ranks(2, [&](int r, comm::Communicator c) {
    if (r == 1) return;
    Tensor t = Tensor::ones({256}).to(kDevice);
    comm::Work w = c.allreduce(comm::buffer_of(t), {.timeout = std::chrono::milliseconds(200)});
    try {
      w.wait(Deadline::after(std::chrono::seconds(10)));
    } catch (const TimeoutError& e) {
      message = e.what();
    }
    EXPECT_THROW(c.allreduce(comm::buffer_of(t)).wait(Deadline::after(std::chrono::seconds(1))), PeerError);
  });
  cuda::emulated::reset_collectives();
  EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
  EXPECT_NE(message.find("allreduce"), std::string::npos) << message;
  EXPECT_NE(message.find("1024 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 1 never arrived"), std::string::npos) << message;
}

}  // namespace
}  // namespace braid
