// A transport's costs on this machine for the simulator's links
// (docs/sim.md, "Links"): `braid launch -n 2 -- braid sim CONFIG
// --measure-link FILE --measure-transport T` starts two processes that pass
// messages through braid's own transport T, each timing them and reading its
// process's CPU time (every thread, user and system: the transport's own
// threads and the kernel's copies count); each writes its figures to
// FILE.<rank> and the parent turns them into alpha, beta and the CPU a message
// costs each end.
//
//   ping-pong of 8 bytes, kSmall round trips: alpha = one way's time; each
//     end's CPU per message = both processes' CPU / (2 kSmall messages x 2 ends)
//   kLarge messages of 1 MiB, rank 0 to rank 1, kInFlight at a time: beta =
//     one message's share of the time / bytes; each end's CPU per byte = (both
//     processes' CPU per message - 2 x the per-message CPU) / (2 x bytes)
//
//   rank 0 also times an f32 sum of one 1 MiB buffer into another: gamma.
//
// Means, not minima: the simulator wants what a message costs in a run,
// wake-ups and waits included, not the best case the chooser calibrates on.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include <unistd.h>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "braid/base/median.h"
#include "braid/comm/bootstrap.h"
#include "braid/comm/env.h"
#include "braid/comm/reduce_op.h"
#include "tools/braid/commands.h"
#include "tools/braid/sim_command.h"

namespace braid::cli {

namespace {

constexpr int kSmall = 2000, kLarge = 200, kWarmup = 20, kCold = 200, kInFlight = 4, kReduce = 51;
constexpr auto kColdGap = std::chrono::milliseconds(1);
constexpr size_t kLargeBytes = 1 << 20;
constexpr uint64_t kTag = 7;

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

}  // namespace

void sim_measure_link_child(const std::string& transport, const std::string& out) {
  const comm::Env env = comm::read_env();
  if (env.size != 2) fail<ConfigError>("--measure-link runs on 2 ranks (braid launch -n 2), not {}", env.size);
  comm::Joined joined = comm::join_job(env, {.transport = transport});
  comm::Transport& t = *joined.transport;
  const int me = t.rank(), peer = 1 - me;
  std::vector<std::byte> buf(kLargeBytes);
  auto wait = [&](comm::Work w) { w.wait(Deadline::after(std::chrono::seconds(60))); };
  auto ping_pong = [&](size_t bytes) {
    std::span<std::byte> b(buf.data(), bytes);
    if (me == 0) {
      wait(t.send(peer, kTag, b));
      wait(t.recv(peer, kTag, b));
    } else {
      wait(t.recv(peer, kTag, b));
      wait(t.send(peer, kTag, b));
    }
  };
  // kInFlight messages posted ahead on both sides, as a collective posts its
  // receives before the data comes (a receive posted late costs the
  // transport a copy out of its buffer for unexpected messages).
  std::vector<std::vector<std::byte>> windows(kInFlight, std::vector<std::byte>(kLargeBytes));
  auto stream = [&](int n) {
    std::vector<comm::Work> pending(kInFlight);
    for (int i = 0; i < n + kInFlight; ++i) {
      const size_t slot = static_cast<size_t>(i % kInFlight);
      if (i >= kInFlight) wait(pending[slot]);
      if (i < n) pending[slot] = me == 0 ? t.send(peer, kTag, windows[slot]) : t.recv(peer, kTag, windows[slot]);
    }
    ping_pong(8);  // the last message has arrived before either clock stops
  };
  for (int i = 0; i < kWarmup; ++i) ping_pong(8), ping_pong(kLargeBytes);
  std::array<double, 6> f{};  // small: wall, cpu; large: wall, cpu; cold: mean one-way seconds (rank 1); gamma
  auto c0 = cpu_seconds();
  auto t0 = Clock::now();
  for (int i = 0; i < kSmall; ++i) ping_pong(8);
  f[0] = seconds_since(t0), f[1] = cpu_seconds() - c0;
  c0 = cpu_seconds(), t0 = Clock::now();
  stream(kLarge);
  f[2] = seconds_since(t0), f[3] = cpu_seconds() - c0;
  // Cold: a message that finds its receiver asleep, as a pipeline's
  // activation or a parameter server's reply does. The steady clock is the
  // host's, so the receiver reads the one-way time off the sender's stamp.
  double cold = 0;
  for (int i = 0; i < kCold; ++i) {
    std::span<std::byte> b(buf.data(), 8);
    if (me == 0) {
      std::this_thread::sleep_for(kColdGap);
      const int64_t stamp = Clock::now().time_since_epoch().count();
      std::memcpy(b.data(), &stamp, sizeof(stamp));
      wait(t.send(peer, kTag, b));
      wait(t.recv(peer, kTag, b));
    } else {
      wait(t.recv(peer, kTag, b));
      int64_t stamp = 0;
      std::memcpy(&stamp, b.data(), sizeof(stamp));
      cold += std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(stamp)).count();
      wait(t.send(peer, kTag, b));
    }
  }
  f[4] = cold / kCold;
  // gamma: one f32 sum pass of a 1 MiB bucket into another (the median of
  // kReduce), as the collectives' reductions and the parameter servers'
  // passes run on data a step has just touched.
  if (me == 0) {
    const size_t n = kLargeBytes / sizeof(float);
    std::vector<float> acc(n, 1.0f), in(n, 2.0f);
    std::vector<double> times;
    for (int i = 0; i < kReduce; ++i) {
      const auto r0 = Clock::now();
      comm::reduce_into(DType::f32, comm::Op::sum, acc.data(), in.data(), n);
      times.push_back(seconds_since(r0));
    }
    f[5] = upper_median(std::move(times)) / static_cast<double>(kLargeBytes);
  }
  write_file_atomic(fmt::format("{}.{}", out, me), fmt::format("{:.9g} {:.9g} {:.9g} {:.9g} {:.9g} {:.9g}\n", f[0],
                                                               f[1], f[2], f[3], f[4], f[5]));
}

MeasuredLink measure_link(const std::string& config, const std::string& transport) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    fmt::format("braid-sim-link-{}", static_cast<long>(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "link").string(), log = (dir / "launch.log").string();
  const std::string exe = self_exe();
  // The child does not read the config; the command line wants one.
  const std::string cmd = fmt::format(
      "'{}' launch -n 2 -- '{}' sim '{}' --measure-link '{}' --measure-transport {} > '{}' 2>&1", exe, exe, config,
      out, transport, log);
  if (const int rc = std::system(cmd.c_str()); rc != 0)
    fail<Error>("braid sim: measuring the {} transport failed (exit {}); see {}", transport, rc, log);
  std::array<std::array<double, 6>, 2> f{};
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(fmt::format("{}.{}", out, r));
    for (double& x : f[r])
      if (!(in >> x) || !(x >= 0)) fail<Error>("braid sim: rank {} of the {} measurement wrote no figures", r, transport);
  }
  std::filesystem::remove_all(dir);
  MeasuredLink m;
  const double round_trip = f[0][0] / kSmall;
  m.alpha = round_trip / 2;
  m.cpu_per_message = (f[0][1] + f[1][1]) / (4.0 * kSmall);
  const double per_large = f[0][2] / kLarge;  // wall per 1 MiB message (the closing ping-pong's share is noise)
  m.beta = std::max(1e-13, per_large / static_cast<double>(kLargeBytes));  // pipelined: no alpha each
  const double cpu_large = (f[0][3] + f[1][3]) / kLarge;  // both ends
  m.cpu_per_byte = std::max(0.0, (cpu_large - 2 * m.cpu_per_message) / (2.0 * kLargeBytes));
  m.cold_alpha = f[1][4];
  m.gamma = f[0][5];
  return m;
}

}  // namespace braid::cli
