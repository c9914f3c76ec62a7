// Runs a parameter-server job inside one test: S servers and W workers as
// threads over the in-process transport. The first error in time is
// rethrown, and it tears the world down so nobody waits for a dead peer.
#pragma once

#include <functional>
#include <vector>

#include "braid/comm/transport/inproc.h"
#include "braid/ps/client.h"
#include "braid/ps/server.h"
#include "tests/testing/first_error.h"

namespace braid::ps::testing {

struct JobResult {
  std::vector<ServerStats> servers;
};

inline JobResult run_job(int servers, int workers, Duration timeout,
                         const std::function<void(Client&, int worker)>& worker_fn) {
  auto world = comm::InprocWorld::create(servers + workers);
  auto transports = world->transports();
  JobResult result;
  result.servers.resize(static_cast<size_t>(servers));
  test::run_threads_first_error(
      servers + workers,
      [&](int r) {
        if (r < servers) {
          Server server(*transports[static_cast<size_t>(r)],
                        {.servers = servers, .workers = workers, .timeout = timeout});
          server.run();
          result.servers[static_cast<size_t>(r)] = server.stats();
        } else {
          Client client(*transports[static_cast<size_t>(r)], {.servers = servers, .timeout = timeout});
          worker_fn(client, r - servers);
        }
      },
      [&] { world->shutdown("a rank of the test job failed"); });
  return result;
}

}  // namespace braid::ps::testing
