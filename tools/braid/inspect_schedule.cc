// `braid inspect schedule --schedule S --stages P --microbatches M [--chunks V]`:
// a pipeline schedule as a picture (docs/pipeline.md): every stage's order,
// the micro-batches it holds at most, and the stages' timelines side by side
// with unit costs per chunk (F = 1; B = 2, or B = W = 1 where the schedule
// splits backwards), with the idle time against the schedule's formula.
#include <cstdio>

#include "braid/parallel/pipeline/schedule.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

struct ScheduleArgs {
  std::string schedule = "1f1b";
  int stages = 4, microbatches = 8, chunks = 1;
};

void print_schedule(const ScheduleArgs& a) {
  namespace pp = parallel::pipeline;
  const pp::Schedule s = pp::parse_schedule(a.schedule);
  const int v = s == pp::Schedule::interleaved ? a.chunks : 1;
  const pp::Costs costs = pp::splits_backward(s) ? pp::Costs{1, 1, 1} : pp::Costs{1, 2, 0};
  std::printf("%s: %d stages, %d micro-batches%s\n", std::string(pp::name(s)).c_str(), a.stages, a.microbatches,
              v > 1 ? fmt::format(", {} chunks per stage", v).c_str() : "");
  for (int p = 0; p < a.stages; ++p) {
    const auto order = pp::actions(s, a.stages, p, a.microbatches, v);
    std::printf("stage %2d (holds at most %d%s): %s\n", p, pp::max_live(order), v > 1 ? " chunks" : "",
                pp::to_string(order).c_str());
  }
  const auto tl = pp::timeline(s, a.stages, a.microbatches, v, costs);
  std::printf("\ntimeline (F %g, B %g%s per chunk; '-' continues the action, '.' idle):\n%s", costs.forward,
              costs.backward, costs.weight > 0 ? ", W 1" : "", pp::timeline_text(tl, 1).c_str());
  const pp::Bubble b = pp::bubble(tl);
  std::printf("\nidle %.4g of the step, %.4g of the work (formula %.4g)\n", b.fraction(), b.ratio(),
              pp::bubble_ratio_formula(s, a.stages, a.microbatches, v, costs));
}

}  // namespace

void add_inspect_schedule(CLI::App& inspect) {
  auto args = std::make_shared<ScheduleArgs>();
  auto* cmd = inspect.add_subcommand("schedule", "a pipeline schedule's per-stage order and timeline");
  cmd->add_option("--schedule", args->schedule, "gpipe, 1f1b, interleaved or zero_bubble")
      ->check(CLI::IsMember({"gpipe", "1f1b", "interleaved", "zero_bubble"}));
  cmd->add_option("--stages", args->stages, "pipeline stages P")->check(CLI::Range(1, 64));
  cmd->add_option("--microbatches", args->microbatches, "micro-batches M")->check(CLI::Range(1, 256));
  cmd->add_option("--chunks", args->chunks, "interleaved: chunks per stage V")->check(CLI::Range(1, 16));
  cmd->callback([args] { print_schedule(*args); });
}

}  // namespace braid::cli
