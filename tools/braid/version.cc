#include <cstdio>

#include "braid/base/thread_pool.h"
#include "tools/braid/commands.h"

namespace braid::cli {

void add_version(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the version and the thread pool size");
  cmd->callback([] {
    std::printf("braid " BRAID_VERSION " (intra-op threads: %d, cores: %d)\n", num_threads(), available_cores());
  });
}

}  // namespace braid::cli
