// Parameter-server push/pull throughput, seen from one worker.
//
//   braid launch --servers S --workers 1 -- ps_throughput --dense-mib 16 [--json FILE]
//   bench/ps/ps_throughput.py --build build        (every size, S = 1 and 2, one table)
//
// Dense: push_dense (asp, sgd updater: the server does one axpy per push) and
// pull_dense of the whole model, one exchange in flight, for one model size:
// a job's dense size is fixed by the first hello, so each size is its own job
// (the driver script runs one per size). GB/s = model bytes / time per op.
// Sparse: push_sparse and pull_sparse of a fixed set of random u64 keys, rows
// of --dim f32, after one untimed pull that creates the rows on the servers.
// keys/s = keys / time per op; GB/s = payload bytes (8 per key + 4 x dim per
// row, both directions summed) / time per op.
//
// Every figure is the median over --reps reps; a rep times enough ops to fill
// ~--rep-seconds (at least one).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/base/median.h"
#include "braid/parallel/process_group.h"
#include "braid/ps/client.h"

namespace {

using namespace braid;

struct Options {
  double dense_mib = 16;                            // 0: no dense measurement
  std::vector<int64_t> keys = {1000, 10000, 100000};  // empty: no sparse measurement
  int64_t dim = 16;
  int reps = 7;
  double rep_seconds = 0.05;
  std::string transport = "auto";
  std::string json;
};

struct Timing {
  double seconds = 0;  // median time per op
  int64_t ops = 0;     // ops per rep
};

// Median over reps of the time per op; `op` runs one operation to completion.
template <class F>
Timing time_op(const Options& o, F&& op) {
  op();  // untimed: page faults, first-touch allocations on the servers
  const auto t0 = Clock::now();
  op();
  const double one = std::max(seconds_since(t0), 1e-7);
  const auto ops = std::clamp<int64_t>(static_cast<int64_t>(o.rep_seconds / one), 1, 10000);
  std::vector<double> per_op;
  for (int r = 0; r < o.reps; ++r) {
    const auto start = Clock::now();
    for (int64_t i = 0; i < ops; ++i) op();
    per_op.push_back(seconds_since(start) / static_cast<double>(ops));
  }
  return {upper_median(std::move(per_op)), ops};
}

int run(const Options& o) {
  const Duration timeout = std::chrono::minutes(2);
  const Deadline forever = Deadline::after(std::chrono::hours(1));
  auto group = parallel::ProcessGroup::join({.transport = o.transport, .timeout = timeout});
  const int servers = group->env().ps_servers;
  const int workers = group->env().size - servers;
  if (servers < 1 || workers != 1) {
    fail<ConfigError>("ps_throughput runs as the one worker of a parameter-server job: braid launch --servers S "
                      "--workers 1 -- ps_throughput (got {} servers, {} workers)",
                      servers, workers);
  }
  ps::Client client(*group->transport(), {.servers = servers, .timeout = timeout});
  ps::PsConfig config;
  config.consistency = ps::Consistency::asp;  // pushes apply on arrival, pulls never wait
  config.updater.name = "sgd";                // one axpy per pushed value
  const auto n = static_cast<int64_t>(o.dense_mib * (1 << 20) / sizeof(float));
  // A job always has a dense model (at least one value) for hello.
  client.hello(config, std::max<int64_t>(n, 1));

  nlohmann::json out = {{"servers", servers}, {"workers", workers}, {"transport", group->transport_name()},
                        {"reps", o.reps}, {"dense", nlohmann::json::array()}, {"sparse", nlohmann::json::array()}};
  std::printf("# ps_throughput: %d server(s), 1 worker, %s; asp, sgd; median of %d reps\n", servers,
              group->transport_name().c_str(), o.reps);

  std::vector<float> weights(static_cast<size_t>(std::max<int64_t>(n, 1)), 0.5f), grads(weights.size(), 1e-6f);
  client.init_dense(weights).wait(forever);
  if (n > 0) {
    const double bytes = static_cast<double>(n) * sizeof(float);
    int64_t clock = 0;
    // lr 0: the axpy still runs, the weights stay put.
    const Timing push = time_op(o, [&] { client.push_dense(grads, clock++, 0.0).wait(forever); });
    const Timing pull = time_op(o, [&] { client.pull_dense(weights, -1).wait(forever); });
    std::printf("%-8s %10s %10s %12s %12s\n", "dense", "push ms", "pull ms", "push GB/s", "pull GB/s");
    std::printf("%5.0fMiB %10.3f %10.3f %12.3f %12.3f\n", o.dense_mib, push.seconds * 1e3, pull.seconds * 1e3,
                bytes / push.seconds / 1e9, bytes / pull.seconds / 1e9);
    out["dense"].push_back({{"bytes", static_cast<int64_t>(bytes)}, {"push_s", push.seconds},
                            {"pull_s", pull.seconds}, {"push_GBps", bytes / push.seconds / 1e9},
                            {"pull_GBps", bytes / pull.seconds / 1e9}, {"push_ops_per_rep", push.ops},
                            {"pull_ops_per_rep", pull.ops}});
  }

  if (!o.keys.empty()) {
    std::printf("%-8s %10s %10s %12s %12s %12s %12s\n", "keys", "push ms", "pull ms", "push Mkeys/s", "pull Mkeys/s",
                "push GB/s", "pull GB/s");
    client.define_table(0, o.dim, 0.01);
    std::mt19937_64 rng(42);
    int64_t clock = 0;
    for (int64_t count : o.keys) {
      std::vector<uint64_t> keys(static_cast<size_t>(count));
      for (auto& k : keys) k = rng();
      std::vector<float> rows(keys.size() * static_cast<size_t>(o.dim)), g(rows.size(), 1e-6f);
      client.pull_sparse(0, keys, rows, -1).wait(forever);  // creates the rows
      const Timing push = time_op(o, [&] { client.push_sparse(0, keys, g, clock++, 0.0).wait(forever); });
      const Timing pull = time_op(o, [&] { client.pull_sparse(0, keys, rows, -1).wait(forever); });
      const double bytes = static_cast<double>(count) * (8.0 + 4.0 * static_cast<double>(o.dim));
      const double k = static_cast<double>(count);
      std::printf("%8lld %10.3f %10.3f %12.3f %12.3f %12.3f %12.3f\n", static_cast<long long>(count),
                  push.seconds * 1e3, pull.seconds * 1e3, k / push.seconds / 1e6, k / pull.seconds / 1e6,
                  bytes / push.seconds / 1e9, bytes / pull.seconds / 1e9);
      out["sparse"].push_back({{"keys", count}, {"dim", o.dim}, {"bytes", static_cast<int64_t>(bytes)},
                               {"push_s", push.seconds}, {"pull_s", pull.seconds},
                               {"push_keys_per_s", k / push.seconds}, {"pull_keys_per_s", k / pull.seconds},
                               {"push_GBps", bytes / push.seconds / 1e9}, {"pull_GBps", bytes / pull.seconds / 1e9},
                               {"push_ops_per_rep", push.ops}, {"pull_ops_per_rep", pull.ops}});
    }
  }
  client.done();
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << out.dump(2) << "\n";
    if (!f) fail<IoError>("ps_throughput: cannot write {}", o.json);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"parameter-server push/pull throughput; run as the worker of braid launch --servers S --workers 1"};
  Options o;
  app.add_option("--dense-mib", o.dense_mib, "dense model size in MiB (one per job; 0: skip dense)");
  app.add_option("--keys", o.keys, "sparse key counts (comma separated; none: skip sparse)")->delimiter(',');
  app.add_flag("--no-sparse", [&o](int64_t) { o.keys.clear(); }, "skip the sparse measurement");
  app.add_option("--dim", o.dim, "sparse row width (f32 values)");
  app.add_option("--reps", o.reps, "timed reps per figure (the median is reported)");
  app.add_option("--rep-seconds", o.rep_seconds, "seconds one rep aims for (at least one op)");
  app.add_option("--transport", o.transport, "auto, shm, tcp (as the servers use)");
  app.add_option("--json", o.json, "also write the results as JSON here");
  try {
    app.parse(argc, argv);
    braid::logging::init(braid::comm::read_env().rank);
    if (o.reps < 1) braid::fail<braid::ConfigError>("--reps must be >= 1, got {}", o.reps);
    return run(o);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "ps_throughput: error: %s\n", e.what());
    return 1;
  }
}
