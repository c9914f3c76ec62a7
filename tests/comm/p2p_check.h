// The point-to-point conformance checks every process-level Transport must
// pass, shared by the in-process gtest suites (tcp/shm ranks as threads) and
// by p2p_worker (real processes under `braid launch` or `mpirun`).
#pragma once

#include <string>

#include "braid/base/deadline.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm::testing {

// Every rank exchanges with every other rank: sizes 0, 1, 7, 4099 and 1 MiB;
// 64 tags received in the reverse of the order sent; 8 messages on one tag
// that must arrive in order; 4 tags equal in their low 31 bits, received in
// reverse. Throws Error describing the first mismatch.
void run_p2p_checks(Transport& t, Deadline d);

}  // namespace braid::comm::testing
