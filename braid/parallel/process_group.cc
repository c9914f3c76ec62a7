#include "braid/parallel/process_group.h"

#include "braid/base/log.h"
#include "braid/comm/transport/inproc.h"
#include "braid/comm/transport/registry.h"

namespace braid::parallel {

std::unique_ptr<ProcessGroup> ProcessGroup::join(const ProcessGroupOptions& options) {
  auto group = std::unique_ptr<ProcessGroup>(new ProcessGroup());
  group->env_ = comm::read_env();
  const comm::Env& env = group->env_;
  const comm::CommOptions comm_options{.timeout = options.timeout};

  if (env.size == 1) {
    group->transport_name_ = "inproc";
    group->transport_ = comm::InprocWorld::create(1)->transport(0);
    group->comm_ = comm::Communicator(group->transport_, comm_options);
    return group;
  }
  std::string name = options.transport;
  if (name == "auto") name = env.local_size == env.size ? "shm" : "tcp";
  group->transport_name_ = name;

  if (name != "mpi") {
    if (env.token.empty()) {
      fail<ConfigError>("rank {}: BRAID_TOKEN is not set; every rank needs the same secret to authenticate "
                        "(braid launch sets it)",
                        env.rank);
    }
    // Under braid launch the launcher serves the store; under mpirun or srun rank 0 does.
    if (env.source != "launch" && env.rank == 0) {
      group->server_ = std::make_unique<comm::StoreServer>(
          comm::StoreServerOptions{.host = env.master_addr, .port = env.master_port, .token = env.token});
    }
    group->store_ = std::make_unique<comm::Store>(comm::store_options(env));
  }
  comm::TransportOptions to = comm::transport_options(env);
  if (options.tcp_streams > 0) to.tcp_streams = options.tcp_streams;
  auto transport = comm::make_transport(name, group->store_.get(), to);
  group->transport_ = std::move(transport);
  group->comm_ = comm::Communicator(group->transport_, comm_options);
  log::info("joined a group of {} ranks over {}", env.size, name);
  return group;
}

}  // namespace braid::parallel
