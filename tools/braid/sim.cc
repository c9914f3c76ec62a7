// `braid sim CONFIG --world P`: predicts the step time of the plan `braid
// train` would run for CONFIG on P ranks, from measured op costs and link
// costs, with a breakdown (compute, exposed communication, waits) and the
// simulated timeline; --sweep ranks other plans for the same job; --validate
// runs the real job here and prints predicted against measured.
#include <cstdio>
#include <optional>
#include <thread>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "braid/comm/cost_model.h"
#include "braid/sim/memory.h"
#include "tools/braid/commands.h"
#include "tools/braid/sim_command.h"

namespace braid::cli {

namespace {

// "3 = 2.5" -> rank 3 computes 2.5x slower.
void add_straggler(sim::Cluster& c, const std::string& spec) {
  const size_t eq = spec.find(':');
  if (eq == std::string::npos) fail<ValueError>("--straggler expects RANK:FACTOR, got '{}'", spec);
  const int rank = std::stoi(spec.substr(0, eq));
  const double factor = std::stod(spec.substr(eq + 1));
  if (rank < 0 || rank >= c.ranks || !(factor > 0)) {
    fail<ValueError>("--straggler {}: rank must be in [0, {}) and the factor positive", spec, c.ranks);
  }
  if (c.slowdown.empty()) c.slowdown.assign(static_cast<size_t>(c.ranks), 1.0);
  c.slowdown[static_cast<size_t>(rank)] = factor;
}

std::string ms(double s) { return fmt::format("{:.3f} ms", s * 1e3); }

// A --world larger than this machine's cores and than one host of the
// cluster below, given without --hosts or --ranks-per-host, is not taken to
// mean every rank on this machine: nobody runs a thousand ranks on one, and
// simulating it (and measuring that many processes side by side to calibrate
// it) took minutes. It is taken to mean hosts of this many ranks with cores of
// their own, as clusters of 8-GPU nodes are commonly built.
constexpr int kAssumedRanksPerHost = 8;

// Fills in the shape of a cluster the command line did not describe and
// returns the line saying so; empty when it described one or the job fits here.
std::string assume_cluster(sim::Cluster& c, const train::Config& config, bool described, bool cores_given,
                           int here_cores) {
  if (described || c.ranks <= std::max(kAssumedRanksPerHost, here_cores)) return {};
  c.ranks_per_host = kAssumedRanksPerHost;
  const int64_t threads = config.get_int("train.threads");
  if (!cores_given) c.cores_per_host = kAssumedRanksPerHost * std::max<int64_t>(1, threads);
  return fmt::format(
      "note: --world {} without --hosts or --ranks-per-host: assumed {} hosts of {} ranks, {:g} cores each, "
      "linked at the default between-host figures; describe your cluster with --hosts or --ranks-per-host, "
      "--cores and --link",
      c.ranks, c.hosts(), c.ranks_per_host, c.cores_per_host);
}

}  // namespace

train::Config sim_config(const SimArgs& args, const std::vector<std::string>& more) {
  std::vector<std::string> sets = args.sets;
  sets.insert(sets.end(), more.begin(), more.end());
  return train::load_config(args.config, sets);
}

// A transport's figures from the op table, measured by two processes when
// the table lacks them (sim_links.cc).
MeasuredLink link_figures(sim::OpTable& table, const std::string& config, const std::string& transport) {
  if (transport != "shm" && transport != "tcp")
    fail<ConfigError>("braid sim: the links of transport '{}' cannot be measured (shm or tcp)", transport);
  std::optional<MeasuredLink> m;
  auto figure = [&](const char* name, double MeasuredLink::*field) {
    return table.figure(fmt::format("link|{}|{}", transport, name), [&] {
      if (!m) m = measure_link(config, transport);
      return (*m).*field;
    });
  };
  return {.alpha = figure("alpha", &MeasuredLink::alpha), .beta = figure("beta", &MeasuredLink::beta),
          .cold_alpha = figure("cold_alpha", &MeasuredLink::cold_alpha),
          .gamma = figure("gamma", &MeasuredLink::gamma),
          .cpu_per_message = figure("cpu_per_message", &MeasuredLink::cpu_per_message),
          .cpu_per_byte = figure("cpu_per_byte", &MeasuredLink::cpu_per_byte)};
}

void add_sim(CLI::App& app) {
  auto* cmd = app.add_subcommand("sim", "predict a training plan's step time from measured costs (docs/sim.md)");
  struct Options {
    SimArgs args;
    int world = 1, hosts = 1, ranks_per_host = 0;
    double cores = std::max(1u, std::thread::hardware_concurrency());
    std::string link, host_link, trace, json, op_table;
    std::vector<std::string> stragglers;
    bool refresh = false, sweep = false, validate = false, alone = false;
    std::string measure_step;  // the side-by-side measurement's child (sim_corun.cc)
    std::string measure_link, measure_transport = "shm";  // a link measurement's child (sim_links.cc)
    std::string link_cpu;
    int64_t measure_batch = 0;
    int measure_threads = 1, measure_microbatches = 1;
    int64_t measure_start = 0;  // steady clock ticks
  };
  auto o = std::make_shared<Options>();
  cmd->add_option("config", o->args.config, "TOML config file (examples/configs/*.toml)")->required();
  cmd->add_option("--set", o->args.sets, "override a key: --set parallel.pipeline=2 (repeatable)");
  cmd->add_option("--world", o->world, "ranks in the job, parameter servers included")->check(CLI::PositiveNumber);
  cmd->add_option("--servers", o->args.predict.servers, "of them, parameter servers (parallel.strategy = ps)");
  cmd->add_option("--hosts", o->hosts, "hosts the ranks are spread over, evenly")->check(CLI::PositiveNumber);
  cmd->add_option("--ranks-per-host", o->ranks_per_host, "instead of --hosts: ranks on each host");
  cmd->add_option("--cores", o->cores, "cores per host (default: this machine's)");
  cmd->add_option("--link", o->link, "between hosts, per host interface: BANDWIDTH[,LATENCY], e.g. 10Gbit/s,5us");
  cmd->add_option("--host-link", o->host_link, "inside a host, per rank (default: parallel.transport's figures)");
  cmd->add_option("--steps", o->args.predict.steps, "steps simulated (the prediction is their mean)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--jitter", o->args.predict.jitter,
                  "stragglers at random: every rank-step's compute x lognormal(sigma)");
  cmd->add_option("--straggler", o->stragglers, "RANK:FACTOR, that rank computes FACTOR times slower (repeatable)");
  cmd->add_option("--seed", o->args.predict.seed, "for --jitter");
  cmd->add_option("--trace", o->trace, "write the simulated timeline (Chrome trace JSON; Perfetto opens it)");
  cmd->add_option("--json", o->json, "write the prediction (and --validate's measurement) as JSON to this file");
  cmd->add_option("--op-table", o->op_table, "the op cost table (default ~/.cache/braid/op_times.json)");
  cmd->add_flag("--refresh", o->refresh, "measure every op again instead of reading the table");
  cmd->add_flag("!--no-calibrate", o->args.predict.calibrate,
                "use the op table's sum as it is, not scaled to one measured eager step of the model");
  cmd->add_flag("--alone", o->alone,
                "calibrate on one process's eager step even when the plan's workers share this machine");
  cmd->add_option("--link-cpu", o->link_cpu,
                  "messages between hosts cost each end the CPU this machine's TRANSPORT (tcp) costs (the hosts are "
                  "this machine's namespaces or containers); default: none (the network copies)");
  cmd->add_option("--measure-step", o->measure_step)->group("");  // hidden: a side-by-side measurement's rank
  cmd->add_option("--measure-link", o->measure_link)->group("");
  cmd->add_option("--measure-transport", o->measure_transport)->group("");
  cmd->add_option("--measure-batch", o->measure_batch)->group("");
  cmd->add_option("--measure-threads", o->measure_threads)->group("");
  cmd->add_option("--measure-microbatches", o->measure_microbatches)->group("");
  cmd->add_option("--measure-start", o->measure_start)->group("");
  cmd->add_flag("--sweep", o->sweep, "rank other plans for the same model and world by predicted samples/s");
  cmd->add_flag("--validate", o->validate, "run the job here (braid launch) and print predicted vs measured");
  cmd->add_option("--validate-steps", o->args.validate_steps, "steps of each real run")->check(CLI::PositiveNumber);
  cmd->add_option("--reps", o->args.reps, "real runs (--validate); the median is compared")->check(CLI::PositiveNumber);
  cmd->callback([o, cmd] {
    SimArgs& args = o->args;
    if (!o->measure_link.empty()) {
      sim_measure_link_child(o->measure_transport, o->measure_link);
      return;
    }
    const train::Config config = sim_config(args);
    sim::require_cpu_device(config);  // before anything is measured
    if (!o->measure_step.empty()) {
      sim_measure_step_child(config, o->measure_step,
                             {.batch = o->measure_batch, .threads = o->measure_threads,
                              .microbatches = o->measure_microbatches,
                              .start = std::chrono::steady_clock::time_point(
                                  std::chrono::steady_clock::duration(o->measure_start))});
      return;
    }
    sim::OpTable table({.path = o->op_table, .refresh = o->refresh});
    sim::Cluster& c = args.predict.cluster;
    c.ranks = o->world;
    c.ranks_per_host = o->ranks_per_host > 0 ? o->ranks_per_host : (o->world + o->hosts - 1) / o->hosts;
    c.cores_per_host = o->cores;
    const int here_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const std::string assumed = assume_cluster(c, config, cmd->count("--hosts") + cmd->count("--ranks-per-host") > 0,
                                               cmd->count("--cores") > 0, here_cores);
    const std::string transport = config.get_string("parallel.transport");
    c.intra = comm::default_link_cost(transport == "auto" ? "shm" : transport);
    c.shared_memory = transport == "auto" || transport == "shm" || transport == "inproc";
    c.inter = comm::default_link_cost("tcp");
    // The cluster is this machine: its workers' compute is measured side by
    // side, and its transport's messages measured.
    const bool here = c.hosts() == 1 && c.cores_per_host == here_cores;
    const std::string measured = transport == "auto" ? "shm" : transport;
    if (here && args.predict.calibrate && (measured == "shm" || measured == "tcp")) {
      const MeasuredLink m = link_figures(table, args.config, measured);
      c.intra.alpha = m.alpha, c.intra.beta = m.beta;
      c.intra.gamma = c.inter.gamma = m.gamma;  // the host's, wherever the bytes came from
      c.intra_cpu = {.per_message = m.cpu_per_message, .per_byte = m.cpu_per_byte};
      c.intra_wake = std::max(0.0, m.cold_alpha - m.alpha);
    }
    if (!o->link_cpu.empty()) {
      const MeasuredLink m = link_figures(table, args.config, o->link_cpu);
      c.inter_cpu = {.per_message = m.cpu_per_message, .per_byte = m.cpu_per_byte};
      c.inter_wake = std::max(0.0, m.cold_alpha - m.alpha);
    }
    if (!o->host_link.empty()) c.intra = sim::parse_link(o->host_link, c.intra);
    if (!o->link.empty()) c.inter = sim::parse_link(o->link, c.inter);
    for (const auto& s : o->stragglers) add_straggler(c, s);
    if (here && !o->alone) args.predict.measure_step = corun_measure();
    args.predict.trace = !o->trace.empty();

    sim::Predictor predictor(table);
    const sim::Prediction p = predictor.predict(config, args.predict);
    table.save();
    std::printf("plan: %s\n", p.plan.describe().c_str());
    std::printf("cluster: %s\n", c.describe().c_str());
    if (!assumed.empty()) std::printf("%s\n", assumed.c_str());
    std::printf("op table: %s (%zu entries, %zu measured now)\n", table.path().c_str(), table.size(), table.measured());
    std::printf("one replica's step: %s (the op table's sum x %.2f: scaled to a measured eager step%s)\n",
                ms(p.profile_step).c_str(), p.calibration,
                p.corun > 1 ? fmt::format(", {} side by side", p.corun).c_str() : "");
    std::printf(
        "predicted step: %s = compute %s + exposed communication %s + waits %s; %.0f samples/s "
        "(%lld tasks simulated in %.2f s)\n",
        ms(p.step).c_str(), ms(p.compute).c_str(), ms(p.exposed_comm).c_str(), ms(p.waits).c_str(), p.samples_per_s,
        static_cast<long long>(p.tasks), p.wall);
    if (const int per_host = std::min(c.ranks_per_host, c.ranks); per_host * p.plan.threads > c.cores_per_host) {
      std::printf("note: %d ranks of %d thread%s on %g cores per host time-share them; the simulator gives each an "
                  "equal share and leaves out the scheduler's switches and cache refills, so expect the real step "
                  "to be slower (docs/sim.md, \"What it leaves out\")\n",
                  per_host, p.plan.threads, p.plan.threads == 1 ? "" : "s", c.cores_per_host);
    }
    if (!o->trace.empty()) {
      write_file_atomic(o->trace, p.trace.dump());
      std::printf("simulated timeline written to %s\n", o->trace.c_str());
    }
    nlohmann::json out = {{"prediction", p.to_json()}, {"cluster", c.describe()}, {"cluster_assumed", !assumed.empty()}};
    // Memory per rank of each pipeline stage (docs/memory.md).
    const std::vector<train::MemoryPlan> memory = sim::plan_memory_per_stage(config, p.plan, p.stage_of_layer);
    for (size_t s = 0; s < memory.size(); ++s) {
      std::printf("memory of a rank of pipeline stage %zu of %zu%s:\n%s", s, memory.size(),
                  p.plan.tensor > 1 ? " (whole layers: tensor shards not built)" : "", memory[s].table().c_str());
      out["memory"].push_back({{"stage", s}, {"peak_activation_bytes", memory[s].peak_activations()},
                               {"parameters", memory[s].parameters}, {"gradients", memory[s].gradients},
                               {"optimizer_state", memory[s].optimizer_state},
                               {"communication", memory[s].communication}, {"total", memory[s].total()}});
    }
    if (o->sweep) {
      const auto best = sim_sweep(predictor, args);
      out["sweep_best"] = best;
      table.save();
    }
    if (o->validate) {
      const Validation v = sim_validate(predictor, args, config, p);
      out["validated_prediction_s"] = v.predicted;
      out["measured_step_s"] = v.measured;
      out["error"] = (v.predicted - v.measured) / v.measured;
      for (const auto& [predicted, measured] : v.runs) {
        out["runs"].push_back({{"predicted_s", predicted}, {"measured_s", measured}});
      }
    }
    if (!o->json.empty()) write_file_atomic(o->json, out.dump(2));
  });
}

}  // namespace braid::cli
