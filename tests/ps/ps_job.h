// Runs a parameter-server job inside one test: S servers and W workers as
// threads over the in-process transport. The first error in time is
// rethrown, and it tears the world down so nobody waits for a dead peer.
#pragma once

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "braid/comm/transport/inproc.h"
#include "braid/ps/client.h"
#include "braid/ps/server.h"

namespace braid::ps::testing {

struct JobResult {
  std::vector<ServerStats> servers;
};

inline JobResult run_job(int servers, int workers, Duration timeout,
                         const std::function<void(Client&, int worker)>& worker_fn) {
  auto world = comm::InprocWorld::create(servers + workers);
  auto transports = world->transports();
  std::mutex mu;
  std::exception_ptr first;
  JobResult result;
  result.servers.resize(static_cast<size_t>(servers));
  auto guard = [&](auto fn) {
    try {
      fn();
    } catch (...) {
      {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
      }
      world->shutdown("a rank of the test job failed");
    }
  };
  std::vector<std::thread> threads;
  for (int s = 0; s < servers; ++s) {
    threads.emplace_back([&, s] {
      guard([&] {
        Server server(*transports[static_cast<size_t>(s)], {.servers = servers, .workers = workers, .timeout = timeout});
        server.run();
        result.servers[static_cast<size_t>(s)] = server.stats();
      });
    });
  }
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      guard([&] {
        Client client(*transports[static_cast<size_t>(servers + w)], {.servers = servers, .timeout = timeout});
        worker_fn(client, w);
      });
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
  return result;
}

}  // namespace braid::ps::testing
