// Shared by the peer benchmark programs (Open MPI, Gloo): argument parsing,
// the adaptive timing loop and the JSON line `braid bench collective --json`
// prints, so bench/collective_vs_peers.py reads all three the same way.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace peer {

struct Args {
  std::vector<size_t> sizes;  // bytes
  double seconds = 0.25;      // timed seconds per size
};

// --sizes 4096,16384 --seconds 0.25
inline Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--seconds") a.seconds = std::atof(v.c_str());
    if (k == "--sizes")
      for (size_t s = 0; s <= v.size();) {
        const size_t c = std::min(v.find(',', s), v.size());
        a.sizes.push_back(std::strtoull(v.substr(s, c - s).c_str(), nullptr, 10));
        s = c + 1;
      }
  }
  return a;
}

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Row {
  size_t bytes;
  long iters;
  double seconds;  // per op, slowest rank
};

// run(bytes) does one all-reduce; agree(x, max) returns x agreed by all ranks
// (max if `max`, else rank 0's value); barrier() synchronizes.
inline std::vector<Row> measure(const Args& a, const std::function<void(size_t)>& run,
                                const std::function<double(double, bool)>& agree,
                                const std::function<void()>& barrier) {
  std::vector<Row> rows;
  for (size_t bytes : a.sizes) {
    // Two untimed warm-ups (connections, page faults), then three to size the loop.
    for (int i = 0; i < 2; ++i) run(bytes);
    const double t0 = now();
    for (int i = 0; i < 3; ++i) run(bytes);
    const long iters = static_cast<long>(
        agree(std::clamp(a.seconds / ((now() - t0) / 3 + 1e-9), 3.0, 20000.0), false));
    // A quarter as many again untimed, so the first size is measured warm
    // too (caches, the CPU's clock, lazily started threads), then timed.
    for (long i = 0; i < iters / 4; ++i) run(bytes);
    barrier();
    const double start = now();
    for (long i = 0; i < iters; ++i) run(bytes);
    rows.push_back({bytes, iters, agree((now() - start) / iters, true)});
  }
  return rows;
}

inline void print_json(const char* name, const char* algorithm, int p, const std::vector<Row>& rows) {
  std::printf("{\"peer\":\"%s\",\"op\":\"allreduce\",\"ranks\":%d,\"dtype\":\"f32\",\"results\":[", name, p);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double algbw = r.bytes / r.seconds / 1e9;
    std::printf("%s{\"bytes\":%zu,\"algorithm\":\"%s\",\"iters\":%ld,\"latency_us\":%.3f,\"algbw_GBps\":%.4f,"
                "\"busbw_GBps\":%.4f}",
                i ? "," : "", r.bytes, algorithm, r.iters, r.seconds * 1e6, algbw, algbw * 2.0 * (p - 1) / p);
  }
  std::printf("]}\n");
  std::fflush(stdout);
}

}  // namespace peer
