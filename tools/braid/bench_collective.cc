// `braid bench collective`: latency, algorithm bandwidth and bus bandwidth of
// one collective per message size, in the nccl-tests convention:
//   algbw = bytes / time;  busbw = algbw x (allreduce 2(p-1)/p,
//   reduce_scatter and allgather (p-1)/p, broadcast 1)
// so busbw is comparable with the link bandwidth whatever p is.
//
//   braid bench collective --transport inproc --ranks 4 --sizes 4K..64M
//   braid launch -n 2 -- braid bench collective --transport tcp --json
//   mpirun -n 2 braid bench collective --transport mpi --sizes 4K..1M
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "braid/base/error.h"
#include "braid/comm/bootstrap.h"
#include "braid/comm/communicator.h"
#include "braid/comm/env.h"
#include "braid/comm/transport/inproc.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

using comm::Communicator;
using comm::Work;

struct BenchOptions {
  std::string op = "allreduce";
  std::string transport = "inproc";
  std::string algorithm = "auto";
  std::string sizes = "4K..64M";
  int factor = 4;          // size step of a range
  int ranks = 2;           // inproc only; process transports take WORLD_SIZE
  double seconds = 0.25;   // timed seconds per size (iterations adapt)
  double timeout_s = 120;  // deadline of each operation and of joining the job
  bool calibrate = false;
  bool check = false;      // verify one all-reduce per size against p(p+1)/2
  bool json = false;
  // All-reduces with AllreduceOptions::background: each is handed to the
  // communicator's progress engine at once, so the time includes the hand-off
  // to an engine thread (without it the waiting caller runs the collective).
  bool background = false;
};

// "4K", "1M", "64M", "512" -> bytes.
size_t parse_size(const std::string& s) {
  size_t pos = 0;
  const unsigned long long v = std::stoull(s, &pos);
  const std::string unit = s.substr(pos);
  if (unit.empty() || unit == "B") return v;
  if (unit == "K" || unit == "KiB") return v << 10;
  if (unit == "M" || unit == "MiB") return v << 20;
  if (unit == "G" || unit == "GiB") return v << 30;
  fail<ConfigError>("--sizes: bad unit in '{}' (use K, M or G)", s);
}

// "4K..64M" (geometric, x factor) or "4K,1M,3M".
std::vector<size_t> parse_sizes(const std::string& spec, int factor) {
  std::vector<size_t> out;
  try {
    if (auto dots = spec.find(".."); dots != std::string::npos) {
      const size_t lo = parse_size(spec.substr(0, dots)), hi = parse_size(spec.substr(dots + 2));
      if (lo == 0 || factor < 2) fail<ConfigError>("--sizes: range must start above 0 and --factor be >= 2");
      for (size_t s = lo; s <= hi; s *= factor) out.push_back(s);
    } else {
      size_t start = 0;
      while (start <= spec.size()) {
        const size_t comma = std::min(spec.find(',', start), spec.size());
        out.push_back(parse_size(spec.substr(start, comma - start)));
        start = comma + 1;
      }
    }
  } catch (const std::logic_error&) {
    fail<ConfigError>("--sizes: cannot parse '{}'", spec);
  }
  return out;
}

double bus_factor(const std::string& op, int p) {
  if (op == "allreduce") return 2.0 * (p - 1) / p;
  if (op == "reduce_scatter" || op == "allgather") return static_cast<double>(p - 1) / p;
  return 1.0;
}

struct Row {
  size_t bytes;
  std::string algorithm;
  int64_t iters;
  double seconds;  // per operation, slowest rank
};

// Runs one op of `bytes` (per-rank payload; for reduce_scatter and allgather the full vector).
Work run_op(Communicator& c, const BenchOptions& o, comm::Algorithm alg, std::vector<float>& a,
            std::vector<float>& b, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  const size_t block = n / c.size();
  comm::BufferRef whole(a.data(), n, DType::f32);
  if (o.op == "allreduce") return c.allreduce(whole, {.algorithm = alg, .background = o.background});
  if (o.op == "broadcast") return c.broadcast(whole);
  if (o.op == "reduce_scatter")
    return c.reduce_scatter(comm::BufferRef(a.data(), block * c.size(), DType::f32),
                            comm::BufferRef(b.data(), block, DType::f32));
  if (o.op == "allgather")
    return c.allgather(comm::BufferRef(b.data(), block, DType::f32),
                       comm::BufferRef(a.data(), block * c.size(), DType::f32));
  fail<ConfigError>("--op must be allreduce, broadcast, reduce_scatter or allgather, not '{}'", o.op);
}

// Every rank contributes rank+1; every element must come back as p(p+1)/2
// (exact in f32 for any p a benchmark runs).
void check_allreduce(Communicator& c, comm::Algorithm alg, std::vector<float>& a, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  std::fill_n(a.begin(), n, static_cast<float>(c.rank() + 1));
  c.allreduce(comm::BufferRef(a.data(), n, DType::f32), {.algorithm = alg}).wait(Deadline::after(c.options().timeout));
  const float want = c.size() * (c.size() + 1) / 2.0f;
  for (size_t i = 0; i < n; ++i)
    if (a[i] != want)
      fail<NumericError>("--check: rank {} element {} of {} bytes is {}, expected {}", c.rank(), i, bytes, a[i], want);
  std::fill_n(a.begin(), n, 0.0f);
}

std::vector<Row> bench_rank(Communicator& c, const BenchOptions& o) {
  const comm::Algorithm alg = comm::parse_algorithm(o.algorithm);
  const std::vector<size_t> sizes = parse_sizes(o.sizes, o.factor);
  size_t max_bytes = 0;
  for (size_t s : sizes) max_bytes = std::max(max_bytes, s);
  // Allocated once and touched, so no size pays for page faults.
  std::vector<float> a(max_bytes / sizeof(float) + 1, 0.0f), b(a.size(), 0.0f);
  // Each operation fails on its own after the communicator's timeout, naming
  // the rank it waited for; this deadline only backs that up.
  auto finish = [&](Work w) { w.wait(Deadline::after(2 * c.options().timeout)); };
  if (o.calibrate) finish(c.calibrate());
  std::vector<Row> rows;
  for (size_t bytes : sizes) {
    // Rank 0 picks an iteration count for ~o.seconds and shares it.
    // Two untimed warm-ups (connections, page faults), then three to size the loop.
    for (int i = 0; i < 2; ++i) finish(run_op(c, o, alg, a, b, bytes));
    const auto t0 = Clock::now();
    for (int i = 0; i < 3; ++i) finish(run_op(c, o, alg, a, b, bytes));
    std::vector<int64_t> iters{
        std::clamp<int64_t>(static_cast<int64_t>(o.seconds / (seconds_since(t0) / 3 + 1e-9)), 3, 20000)};
    finish(c.broadcast(iters));
    // A quarter as many again untimed (the peers' loop in bench/peers does
    // the same), so the first size is measured warm too.
    for (int64_t i = 0; i < iters[0] / 4; ++i) finish(run_op(c, o, alg, a, b, bytes));
    finish(c.barrier());
    const auto start = Clock::now();
    for (int64_t i = 0; i < iters[0]; ++i) finish(run_op(c, o, alg, a, b, bytes));
    std::vector<double> per_op{seconds_since(start) / iters[0]};
    finish(c.allreduce(per_op, {.op = comm::Op::max}));
    if (o.check && o.op == "allreduce") check_allreduce(c, alg, a, bytes);
    const std::string used = o.op == "allreduce" ? std::string(comm::name(alg == comm::Algorithm::automatic
                                                                            ? c.choose_allreduce(bytes) : alg))
                                                 : "ring/tree";
    rows.push_back({bytes, used, iters[0], per_op[0]});
  }
  return rows;
}

// `transport`: the one in use (auto resolved).
void print(const BenchOptions& o, const std::string& transport, int p, const std::vector<Row>& rows,
           const comm::LinkCost& cost) {
  if (o.json) {
    nlohmann::json j{{"op", o.op}, {"transport", transport}, {"ranks", p}, {"dtype", "f32"},
                     {"alpha_us", cost.alpha * 1e6}, {"beta_GBps", 1e-9 / cost.beta}};
    for (const Row& r : rows)
      j["results"].push_back({{"bytes", r.bytes}, {"algorithm", r.algorithm}, {"iters", r.iters},
                              {"latency_us", r.seconds * 1e6}, {"algbw_GBps", r.bytes / r.seconds / 1e9},
                              {"busbw_GBps", r.bytes / r.seconds / 1e9 * bus_factor(o.op, p)}});
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("# braid bench collective: %s over %s, %d ranks, f32 (model: alpha %.2f us, beta %.2f GB/s)\n",
              o.op.c_str(), transport.c_str(), p, cost.alpha * 1e6, 1e-9 / cost.beta);
  std::printf("%12s %20s %8s %12s %12s %12s\n", "bytes", "algorithm", "iters", "time(us)", "algbw(GB/s)",
              "busbw(GB/s)");
  for (const Row& r : rows)
    std::printf("%12zu %20s %8lld %12.2f %12.3f %12.3f\n", r.bytes, r.algorithm.c_str(),
                static_cast<long long>(r.iters), r.seconds * 1e6, r.bytes / r.seconds / 1e9,
                r.bytes / r.seconds / 1e9 * bus_factor(o.op, p));
}

void run(const BenchOptions& o) {
  if (o.timeout_s <= 0) fail<ConfigError>("--timeout must be > 0 seconds");
  const comm::CommOptions comm_options{
      .timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(o.timeout_s))};
  if (o.transport == "inproc") {
    if (o.ranks < 1) fail<ConfigError>("--ranks must be >= 1");
    auto world = comm::InprocWorld::create(o.ranks);
    std::vector<Communicator> comms;
    for (int r = 0; r < o.ranks; ++r)
      comms.emplace_back(std::shared_ptr<comm::Transport>(world->transport(r)), comm_options);
    std::vector<std::vector<Row>> rows(o.ranks);
    std::vector<std::exception_ptr> errors(o.ranks);
    std::vector<std::thread> threads;
    for (int r = 0; r < o.ranks; ++r)
      threads.emplace_back([&, r] {
        try {
          rows[r] = bench_rank(comms[r], o);
        } catch (...) {
          errors[r] = std::current_exception();
          world->shutdown("rank " + std::to_string(r) + " failed");
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    print(o, o.transport, o.ranks, rows[0], comms[0].link_cost());
    return;
  }
  const comm::Env env = comm::read_env();
  if (env.size < 2)
    fail<ConfigError>("--transport {} needs 2 or more ranks: run under braid launch -n N, mpirun -n N or srun -n N "
                      "(or use --transport inproc --ranks N)",
                      o.transport);
  comm::Joined joined = comm::join_job(env, {.transport = o.transport, .timeout = comm_options.timeout});
  Communicator c(joined.transport, comm_options);
  const std::vector<Row> rows = bench_rank(c, o);
  if (env.rank == 0) print(o, joined.transport_name, env.size, rows, c.link_cost());
}

}  // namespace

void add_bench_collective(CLI::App& app) {
  // `bench` groups every benchmark subcommand; whoever registers first creates it.
  CLI::App* bench = nullptr;
  for (CLI::App* s : app.get_subcommands([](CLI::App* a) { return a->get_name() == "bench"; })) bench = s;
  if (!bench) {
    bench = app.add_subcommand("bench", "Benchmarks");
    bench->require_subcommand(1);
  }
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = bench->add_subcommand("collective", "Latency and bandwidth of a collective per message size");
  cmd->add_option("--op", o->op, "allreduce, reduce_scatter, allgather or broadcast")->capture_default_str();
  cmd->add_option("--transport", o->transport,
                  "inproc (ranks as threads) or a process transport (tcp, shm, mpi, auto) under braid launch, "
                  "mpirun or srun")
      ->capture_default_str();
  cmd->add_option("--algorithm", o->algorithm, "auto or an all-reduce algorithm (ring, halving_doubling, ...)")
      ->capture_default_str();
  cmd->add_option("--sizes", o->sizes, "LO..HI (geometric) or a comma list; K, M, G suffixes")->capture_default_str();
  cmd->add_option("--factor", o->factor, "Step between sizes of a range")->capture_default_str();
  cmd->add_option("--ranks", o->ranks, "Ranks for --transport inproc")->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "Timed seconds per size")->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "Seconds joining the job or any one operation may wait for a peer")
      ->capture_default_str();
  cmd->add_flag("--calibrate", o->calibrate, "Measure alpha/beta first (the chooser then uses them)");
  cmd->add_flag("--check", o->check, "Verify one all-reduce result per size");
  cmd->add_flag("--json", o->json, "One JSON object instead of a table");
  cmd->add_flag("--background", o->background,
                "All-reduces start at once on the progress engine (measures the hand-off; not honoured "
                "by the shared-memory path: name an --algorithm)");
  cmd->callback([o] { run(*o); });
}

}  // namespace braid::cli
