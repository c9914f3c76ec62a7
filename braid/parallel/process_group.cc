#include "braid/parallel/process_group.h"

#include "braid/base/log.h"
#include "braid/comm/transport/inproc.h"

namespace braid::parallel {

std::unique_ptr<ProcessGroup> ProcessGroup::join(const ProcessGroupOptions& options) {
  auto group = std::unique_ptr<ProcessGroup>(new ProcessGroup());
  const comm::Env env = comm::read_env();
  const comm::CommOptions comm_options{.timeout = options.timeout, .history_dir = options.history_dir};
  if (env.size == 1) {
    group->joined_.env = env;
    group->joined_.transport_name = "inproc";
    group->joined_.transport = comm::InprocWorld::create(1)->transport(0);
  } else {
    group->joined_ = comm::join_job(env, {.transport = options.transport, .tcp_streams = options.tcp_streams,
                                          .max_message = options.max_message, .timeout = options.join_timeout});
    logging::info("joined a group of {} ranks over {}", env.size, group->joined_.transport_name);
  }
  group->comm_ = comm::Communicator(group->joined_.transport, comm_options);
  return group;
}

}  // namespace braid::parallel
