// A braid program for multi-process transport tests and the point-to-point
// benchmark. It reads its place in the job from the environment (comm/env.h),
// so it runs under `braid launch`, `mpirun` or `srun` alike.
//
//   p2p_worker check --transport tcp|shm|mpi   conformance checks (p2p_check.h)
//   p2p_worker die   --transport tcp|shm       the last rank vanishes; the others
//                                              must get a PeerError naming it
//   p2p_worker die_in_allreduce --transport shm
//                                              the same, while the others wait in a
//                                              shared-memory all-reduce
//   p2p_worker desync --transport ... --history-dir DIR
//                                              rank 1 broadcasts while the others
//                                              all-reduce: all report the desync
//   p2p_worker bench --transport ... [--iters-scale F]
//                                              ranks 0 and 1 ping-pong; prints
//                                              one-way latency and bandwidth
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/bootstrap.h"
#include "braid/comm/communicator.h"
#include "braid/comm/env.h"
#include "braid/comm/history.h"
#include "tests/comm/p2p_check.h"

using namespace braid;
using namespace braid::comm;
using namespace std::chrono_literals;

namespace {

int die(Transport& t) {
  int victim = t.size() - 1;
  if (t.rank() == victim) {
    std::fflush(stdout);
    ::_exit(0);  // no goodbye: sockets and mappings just vanish with the process
  }
  std::vector<std::byte> buf(64);
  auto t0 = Clock::now();
  try {
    t.recv(victim, 1, buf).wait(Deadline::after(20s));
  } catch (const PeerError& e) {
    bool named = std::string(e.what()).find(fmt::format("rank {}", victim)) != std::string::npos;
    std::printf("rank %d: peer loss reported after %.2f s: %s\n", t.rank(), seconds_since(t0), e.what());
    return named ? 0 : 1;
  } catch (const TimeoutError& e) {
    std::printf("rank %d: FAILED, no peer error, only a timeout: %s\n", t.rank(), e.what());
    return 1;
  }
  std::printf("rank %d: FAILED, recv from a dead rank completed\n", t.rank());
  return 1;
}

// The arena's waits read no channel: a dead rank must still be named at once.
int die_in_allreduce(std::shared_ptr<Transport> t) {
  const int victim = t->size() - 1, me = t->rank();
  Communicator comm(t);
  std::vector<float> buf(1 << 16, 1.0f);
  const AllreduceOptions shared{.algorithm = Algorithm::shared_memory, .timeout = 20s};
  comm.allreduce(buf, shared).wait(Deadline::after(30s));  // sets the arena up
  if (me == victim) {
    std::fflush(stdout);
    ::_exit(0);
  }
  const auto t0 = Clock::now();
  try {
    comm.allreduce(buf, shared).wait(Deadline::after(30s));
  } catch (const PeerError& e) {
    const bool named = std::string(e.what()).find(fmt::format("rank {}", victim)) != std::string::npos;
    std::printf("rank %d: peer loss reported after %.2f s: %s\n", me, seconds_since(t0), e.what());
    return named && seconds_since(t0) < 5 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("rank %d: FAILED, not a peer error: %s\n", me, e.what());
    return 1;
  }
  std::printf("rank %d: FAILED, all-reduce with a dead rank completed\n", me);
  return 1;
}

// Rank 1 broadcasts 8 bytes while the others all-reduce 4 MiB (collective #2):
// every rank must fail with a DesyncError naming both calls, well before the
// 20 s timeout, and leave its history in `dir`. Exits 3 on the expected
// failure (so `braid launch` reports it), 1 on anything else.
int desync(std::shared_ptr<Transport> t, const std::string& dir) {
  const int me = t->rank();
  Communicator comm(t, {.history_dir = dir});
  comm.barrier({.timeout = 20s}).wait(Deadline::after(30s));
  std::vector<float> big(1 << 20, 1.0f), small(2, 1.0f);
  const auto t0 = Clock::now();
  try {
    if (me == 1) {
      comm.broadcast(small, {.root = 0, .timeout = 20s}).wait(Deadline::after(30s));
    } else {
      comm.allreduce(big, {.algorithm = Algorithm::ring, .timeout = 20s}).wait(Deadline::after(30s));
    }
  } catch (const DesyncError& e) {
    const bool named = std::string(e.what()).find("rank 1 is at broadcast #2") != std::string::npos &&
                       std::string(e.what()).find("are at allreduce #2 (4 MiB") != std::string::npos;
    std::printf("rank %d: desync reported after %.2f s: %s\n", me, seconds_since(t0), e.what());
    std::fflush(stdout);
    return named && seconds_since(t0) < 10 ? 3 : 1;
  } catch (const std::exception& e) {
    std::printf("rank %d: FAILED, not a desync: %s\n", me, e.what());
    return 1;
  }
  std::printf("rank %d: FAILED, mismatched collectives completed\n", me);
  return 1;
}

int bench(Transport& t, double scale) {
  if (t.rank() > 1) return 0;
  const int peer = 1 - t.rank();
  const std::vector<size_t> sizes{8, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
  std::vector<std::byte> buf(sizes.back());
  for (auto& b : buf) b = std::byte{1};
  if (t.rank() == 0) std::printf("%-10s %12s %12s\n", "bytes", "one-way us", "GB/s");
  for (size_t n : sizes) {
    std::span<std::byte> s(buf.data(), n);
    int iters = std::max(4, static_cast<int>(scale * (n <= 65536 ? 2000 : (256 << 20) / n)));
    auto round = [&] {
      if (t.rank() == 0) {
        t.send(peer, 0, s).wait(Deadline::after(60s));
        t.recv(peer, 0, s).wait(Deadline::after(60s));
      } else {
        t.recv(peer, 0, s).wait(Deadline::after(60s));
        t.send(peer, 0, s).wait(Deadline::after(60s));
      }
    };
    for (int i = 0; i < std::max(2, iters / 10); ++i) round();  // warm-up
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) round();
    double one_way = seconds_since(t0) / (2.0 * iters);
    if (t.rank() == 0) {
      std::printf("%-10zu %12.2f %12.3f\n", n, one_way * 1e6, static_cast<double>(n) / one_way / 1e9);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "check";
  std::string transport = "tcp";
  double scale = 1.0;
  std::string history_dir;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--transport")) transport = argv[i + 1];
    else if (!std::strcmp(argv[i], "--history-dir")) history_dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--iters-scale")) scale = std::atof(argv[i + 1]);
  }
  try {
    Env env = read_env();
    logging::init(env.rank);
    Joined joined = join_job(env, {.transport = transport});
    std::shared_ptr<Transport> t = joined.transport;
    int rc = 0;
    if (mode == "check") {
      testing::run_p2p_checks(*t, Deadline::after(60s));
      std::printf("rank %d/%d: %s point-to-point checks passed\n", t->rank(), t->size(), transport.c_str());
    } else if (mode == "die") {
      rc = die(*t);
    } else if (mode == "die_in_allreduce") {
      rc = die_in_allreduce(t);
    } else if (mode == "desync") {
      rc = desync(t, history_dir);
    } else if (mode == "bench") {
      rc = bench(*t, scale);
    } else {
      std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
      return 2;
    }
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "p2p_worker: %s\n", e.what());
    return 1;
  }
}
