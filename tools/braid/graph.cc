// `braid graph CONFIG`: captures one training step of the model a config
// trains (forward, loss, backward, optimizer update) on the meta device —
// nothing is computed — simplifies it (dead code, common subexpressions,
// constant folding) and prints its size before and after each pass, its
// planned memory and its Work-Depth figures; --text prints the graph, --json
// and --dot write it. --ranks and --run place, cut and run it across ranks
// (graph_partition.cc).
#include <cstdio>
#include <map>

#include "braid/base/error.h"
#include "braid/graph/dot.h"
#include "braid/graph/memory.h"
#include "braid/graph/passes.h"
#include "braid/graph/serialize.h"
#include "braid/graph/step.h"
#include "braid/graph/work_depth.h"
#include "braid/tensor/device.h"
#include "braid/train/trainer_setup.h"
#include "tools/braid/commands.h"
#include "tools/braid/graph_command.h"

namespace braid::cli {

void add_graph(CLI::App& app) {
  auto* cmd = app.add_subcommand("graph", "capture a training step as a dataflow graph and analyse it");
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    bool text = false;
    std::string json;
    std::string dot, svg;
    bool raw = false;
    std::vector<int> processors{1, 2, 8, 64};
    GraphPartitionArgs partition;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("config", args->config, "TOML config file (examples/configs/*.toml)")->required();
  cmd->add_option("--set", args->sets, "override a key: --set model.name=mlp (repeatable)");
  cmd->add_flag("--text", args->text, "print the graph, one line per node");
  cmd->add_option("--json", args->json, "write the graph as JSON to this file");
  cmd->add_option("--dot", args->dot, "write the graph for Graphviz to this file (dot -Tsvg FILE -o step.svg)");
  cmd->add_option("--svg", args->svg, "draw the graph as SVG with Graphviz's dot (Debian: graphviz)");
  cmd->add_flag("--no-passes", args->raw, "keep the graph as captured");
  cmd->add_option("--processors", args->processors, "p for Brent's bound T_p <= W/p + D")->delimiter(',');
  cmd->add_option("--ranks", args->partition.ranks,
                  "place the step on N ranks and cut it into one graph per rank (with --run: the job's size)");
  cmd->add_option("--place", args->partition.place, "with --ranks: 'stages' (the pipeline plan's cut) or 'work'");
  cmd->add_option("--run", args->partition.run,
                  "run the partitioned step for STEPS steps on the training data (braid launch -n N -- braid graph ...)");
  cmd->add_option("--print-every", args->partition.print_every, "with --run: print the loss every K steps")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] {
    const train::Config config = train::load_config(args->config, args->sets);
    // The step is captured on the meta device, and --run executes it with the
    // CPU kernels: a GPU config would silently be analysed and run as the CPU's.
    train::require_cpu_device(config, "braid graph",
                              "it captures the step on the meta device and --run executes it on the CPU");
    if (args->partition.ranks > 0 || args->partition.run > 0) {
      args->partition.dot = args->dot;
      args->partition.svg = args->svg;
      graph_partition(config, args->partition);
      return;
    }
    train::ModelAndBatch m = train::model_and_batch(config);
    auto optimizer = train::make_optimizer(config, m.model->parameters());
    Shape x_shape{m.batch}, y_shape{m.batch};
    x_shape.insert(x_shape.end(), m.example.input_shape.begin(), m.example.input_shape.end());
    y_shape.insert(y_shape.end(), m.example.target_shape.begin(), m.example.target_shape.end());
    const graph::Graph captured = graph::capture_training_step_meta(
        *m.model, *optimizer, m.loss, x_shape, m.example.input_dtype, y_shape, m.example.target_dtype);
    std::printf("%s step, batch %lld, optimizer %s: captured %zu nodes, %zu values (%zu inputs, %zu constants)\n",
                config.get_string("model.name").c_str(), static_cast<long long>(m.batch), optimizer->name().c_str(),
                captured.nodes().size(), captured.values().size(), captured.inputs().size(),
                captured.constants().size());
    graph::Graph g = captured;
    if (!args->raw) {
      std::vector<graph::PassReport> report;
      g = graph::simplify(captured, &report);
      std::map<std::string, size_t> removed;
      for (const auto& r : report) removed[r.pass] += r.nodes_before - r.nodes_after;
      for (const auto& [pass, n] : removed) std::printf("  %-22s -%zu nodes\n", pass.c_str(), n);
      std::printf("after the passes: %zu nodes, %zu values\n", g.nodes().size(), g.values().size());
    }
    const graph::MemoryPlan plan = graph::plan_memory(g);
    std::printf("intermediates: planned peak %.2f MiB (all of them at once: %.2f MiB)\n",
                static_cast<double>(plan.peak_bytes) / (1 << 20), static_cast<double>(plan.total_bytes) / (1 << 20));
    if (args->text) std::printf("%s", g.to_text().c_str());
    std::printf("%s", graph::to_text(graph::work_depth(g), args->processors).c_str());
    if (!args->json.empty()) {
      graph::save(g, args->json);
      std::printf("graph written to %s\n", args->json.c_str());
    }
    if (!args->dot.empty() || !args->svg.empty()) write_graph_picture(graph::to_dot(g), args->dot, args->svg);
  });
}

}  // namespace braid::cli
