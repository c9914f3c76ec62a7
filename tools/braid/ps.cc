// `braid ps server`: one parameter server of a job. `braid launch --servers S
// --workers W` starts these itself; run it by hand (with the same RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT, BRAID_TOKEN and BRAID_PS_SERVERS as
// the launcher would set) to place servers on machines of your choice.
#include <cstdlib>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/parallel/process_group.h"
#include "braid/ps/server.h"
#include "tools/braid/commands.h"

namespace braid::cli {

void add_ps(CLI::App& app) {
  auto* ps = app.add_subcommand("ps", "parameter-server roles");
  ps->require_subcommand(1);
  auto* cmd = ps->add_subcommand("server", "serve one shard of a parameter-server job (rank < BRAID_PS_SERVERS)");
  struct Args {
    std::string transport = "auto";
    double timeout_s = 300;
  };
  auto args = std::make_shared<Args>();
  if (const char* t = std::getenv("BRAID_TRANSPORT"); t && *t) args->transport = t;
  cmd->add_option("--transport", args->transport, "auto, tcp, shm or mpi: the same as the workers' parallel.transport")
      ->envname("BRAID_TRANSPORT");
  cmd->add_option("--timeout", args->timeout_s, "seconds to wait for workers until they send the job's own timeout");
  cmd->callback([args] {
    const comm::Env env = comm::read_env();
    logging::init(env.rank);
    if (env.ps_servers < 1 || env.rank >= env.ps_servers) {
      fail<ConfigError>("braid ps server: rank {} is not a server rank (BRAID_PS_SERVERS = {}); start the job with "
                        "braid launch --servers S --workers W",
                        env.rank, env.ps_servers);
    }
    const Duration timeout =
        std::chrono::duration_cast<Duration>(std::chrono::duration<double>(args->timeout_s));
    auto group = parallel::ProcessGroup::join({.transport = args->transport, .timeout = timeout});
    ps::Server server(*group->transport(),
                      {.servers = env.ps_servers, .workers = env.size - env.ps_servers, .timeout = timeout});
    server.run();
  });
}

}  // namespace braid::cli
