// `braid inspect history DIR`: the story of a failed job across ranks, from the
// history dumps its communicators wrote (rank-<R>.json in DIR or DIR/history).
// `braid inspect trace DIR [--out FILE]`: the ranks' timelines (DIR/trace/rank-<R>.json)
// merged into one Chrome trace, a row group per rank.
#include <cstdio>

#include "braid/base/trace.h"
#include "braid/comm/history_dump.h"
#include "tools/braid/commands.h"

namespace braid::cli {

void add_inspect_history(CLI::App& inspect) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = inspect.add_subcommand("history", "what every rank was doing when a collective failed (history dumps)");
  cmd->add_option("dir", *dir, "the run's train.out_dir, or the folder holding rank-<R>.json")->required();
  cmd->callback([dir] {
    const auto stories = comm::history_stories(comm::read_history_dumps(*dir));
    std::printf("%s", comm::format_stories(stories).c_str());
  });

  auto trace_dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto* tr = inspect.add_subcommand("trace", "merge the ranks' timelines (train.trace) into one Chrome trace");
  tr->add_option("dir", *trace_dir, "the run's train.out_dir, or the folder holding rank-<R>.json")->required();
  tr->add_option("--out", *out, "merged file (default: DIR/trace.json)");
  tr->callback([trace_dir, out] {
    const trace::Merged m = trace::merge_folder(*trace_dir, *out);
    std::printf("%s: %zu events from ranks [%s]\n", m.path.c_str(), m.events, fmt::format("{}", fmt::join(m.ranks, ", ")).c_str());
  });
}

}  // namespace braid::cli
