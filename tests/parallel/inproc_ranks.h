// Ranks as threads over the in-process transport, each with a communicator
// (20 s timeout) and one intra-op thread; the first error is rethrown and
// shuts the world down so no rank waits for a dead one.
#pragma once

#include <chrono>
#include <memory>

#include "braid/base/thread_pool.h"
#include "braid/comm/communicator.h"
#include "braid/comm/transport/inproc.h"
#include "tests/testing/first_error.h"

namespace braid::parallel::testing {

template <class Fn>
void on_ranks(int world, Fn fn) {
  auto inproc = comm::InprocWorld::create(world);
  test::run_threads_first_error(
      world,
      [&](int r) {
        set_num_threads(1);
        fn(r, comm::Communicator(std::shared_ptr<comm::Transport>(inproc->transport(r)),
                                 {.timeout = std::chrono::seconds(20)}));
      },
      [&] { inproc->shutdown("a rank failed"); });
}

}  // namespace braid::parallel::testing
