// `braid sim --sweep`: the same model on the same ranks under other plans —
// mesh degrees (data x tensor x pipeline), expert parallelism for a model
// with MoE layers, pipeline schedules and
// micro-batches, bucket sizes and overlap, codecs, parameter servers, local
// SGD — each predicted, ranked by samples/s of the whole job. Plans whose
// updates differ from synchronous SGD's (local SGD, asynchronous servers) are
// marked "(other updates)": they may need more steps to the same accuracy,
// which a step-time prediction does not see. Plans the
// model cannot take (a tensor degree its layers do not divide, more stages
// than layers) are counted and left out.
#include <algorithm>
#include <cstdio>

#include "braid/base/error.h"
#include "tools/braid/sim_command.h"

namespace braid::cli {

namespace {

struct Candidate {
  std::string label;
  std::vector<std::string> sets;
  int servers = 0;
};

// experts: model.moe.experts (0: no MoE layers, no expert-parallel plans).
std::vector<Candidate> candidates(int world, int64_t batch, int64_t experts) {
  std::vector<Candidate> out;
  const std::vector<int> degrees{1, 2, 4, 8};
  for (int t : degrees) {
    for (int p : degrees) {
      if (world % (t * p) != 0) continue;
      const int d = world / (t * p);
      std::vector<std::string> mesh{fmt::format("parallel.tensor={}", t), fmt::format("parallel.pipeline={}", p),
                                    "parallel.data=0",
                                    d > 1 ? "parallel.strategy=allreduce" : "parallel.strategy=none"};
      // A sequence-parallel config's plans without a tensor axis run without it.
      if (t == 1) mesh.push_back("parallel.sequence_parallel=false");
      std::vector<std::vector<std::string>> schedules{{}};
      if (p > 1) {
        schedules.clear();
        for (int m : {p, 2 * p, 4 * p}) {
          if (batch % m != 0) continue;
          for (const char* s : {"1f1b", "gpipe", "zero_bubble"}) {
            schedules.push_back({fmt::format("parallel.microbatches={}", m), fmt::format("parallel.schedule={}", s)});
          }
          // Two chunks per rank (refused where the model has fewer than 2 P layers).
          schedules.push_back({fmt::format("parallel.microbatches={}", m), "parallel.schedule=interleaved",
                               "parallel.virtual_stages=2"});
        }
      }
      std::vector<std::vector<std::string>> syncs{{}};
      if (d > 1) {
        syncs.clear();
        for (int kb : {256, 1024, 4096}) syncs.push_back({fmt::format("parallel.bucket_kb={}", kb)});
        syncs.push_back({"parallel.overlap=false"});
        for (const char* codec : {"fp16", "topk", "powersgd"})
          syncs.push_back({fmt::format("parallel.codec={}", codec)});
      }
      for (const auto& s : schedules) {
        for (const auto& g : syncs) {
          Candidate c;
          c.sets = mesh;
          c.sets.insert(c.sets.end(), s.begin(), s.end());
          c.sets.insert(c.sets.end(), g.begin(), g.end());
          c.label = fmt::format("data {} x tensor {} x pipeline {}", d, t, p);
          for (const auto& x : s) c.label += " " + x.substr(x.find('.') + 1);
          for (const auto& x : g) c.label += " " + x.substr(x.find('.') + 1);
          out.push_back(std::move(c));
        }
      }
      // Expert parallelism: groups of x data ranks sharing out the experts (x
      // dividing the data degree and the experts), with the default buckets.
      for (int x : degrees) {
        if (x == 1 || experts <= 0 || d % x != 0 || experts % x != 0) continue;
        for (const auto& s : schedules) {
          Candidate c;
          c.sets = mesh;
          c.sets.push_back(fmt::format("parallel.expert={}", x));
          c.sets.insert(c.sets.end(), s.begin(), s.end());
          c.label = fmt::format("data {} x tensor {} x pipeline {} expert {}", d, t, p, x);
          for (const auto& y : s) c.label += " " + y.substr(y.find('.') + 1);
          out.push_back(std::move(c));
        }
      }
    }
  }
  if (world > 1) {
    out.push_back({"local_sgd period 8 (other updates)",
                   {"parallel.strategy=local_sgd", "local_sgd.period=8", "local_sgd.warmup=0"},
                   0});
  }
  // Parameter servers: one for every 8 ranks (at least one), the rest workers.
  // Every worker exchanges with every server, S x W messages; since the
  // simulator settles rates once per instant, 1024 ranks play in about 1.6 s.
  const int servers = std::max(1, world / 8);
  if (world > servers) {
    for (const char* mode : {"bsp", "asp"}) {
      const char* other = std::string(mode) == "asp" ? " (other updates)" : "";
      out.push_back({fmt::format("ps {} ({} servers){}", mode, servers, other),
                     {"parallel.strategy=ps", fmt::format("ps.consistency={}", mode)},
                     servers});
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> sim_sweep(sim::Predictor& predictor, const SimArgs& args) {
  const train::Config base = sim_config(args);
  struct Row {
    Candidate c;
    sim::Prediction p;
  };
  std::vector<Row> rows;
  int refused = 0;
  std::string first_refusal;
  const int64_t experts = base.get_string("model.name") == "gpt" ? base.get_int("model.moe.experts") : 0;
  for (Candidate& c : candidates(args.predict.cluster.ranks, base.get_int("train.batch_size"), experts)) {
    try {
      sim::PredictOptions o = args.predict;
      o.servers = c.servers;
      o.trace = false;
      const train::Config config = sim_config(args, c.sets);
      rows.push_back({c, predictor.predict(config, o)});
    } catch (const Error& e) {
      if (refused++ == 0) first_refusal = e.what();
    }
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.p.samples_per_s > b.p.samples_per_s; });
  std::printf("\nsweep: %zu plans on %d ranks, ranked by samples/s (%d refused%s%s)\n", rows.size(),
              args.predict.cluster.ranks, refused, refused ? "; first: " : "", first_refusal.c_str());
  std::printf("%4s  %-62s %12s %10s %10s %10s %10s\n", "rank", "plan", "samples/s", "step ms", "compute", "comm",
              "waits");
  for (size_t i = 0; i < rows.size() && i < 20; ++i) {
    const auto& p = rows[i].p;
    std::printf("%4zu  %-62s %12.0f %10.3f %10.3f %10.3f %10.3f\n", i + 1, rows[i].c.label.c_str(), p.samples_per_s,
                p.step * 1e3, p.compute * 1e3, p.exposed_comm * 1e3, p.waits * 1e3);
  }
  if (rows.empty()) return {};
  std::vector<std::string> best = rows.front().c.sets;
  if (rows.front().c.servers > 0) best.push_back(fmt::format("--servers {}", rows.front().c.servers));
  return best;
}

}  // namespace braid::cli
