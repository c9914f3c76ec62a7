// mpi: the Transport over Open MPI point-to-point (MPI_Isend/MPI_Irecv on a
// duplicate of MPI_COMM_WORLD), for clusters that already run MPI. Needs
// MPI_THREAD_MULTIPLE: user threads post operations directly and one progress
// thread tests them. MPI's own matching provides FIFO per (source, tag).
//
// Limits: a braid tag (64 bits) is mixed into 0..MPI_TAG_UB (2^31 - 1 with
// Open MPI), so two tags in flight at once share an MPI tag with probability
// about 2^-31 per pair; a receive that would share one with a different
// pending receive from the same peer fails with ValueError instead of
// matching the wrong message. Messages over 1 GiB travel as several MPI
// messages.
#pragma once

#include <chrono>
#include <memory>

#include "braid/comm/transport/transport.h"

namespace braid::comm {

// Holds the process's MpiSession (mpi_session.h: MPI_THREAD_MULTIPLE, and
// MPI finalized once the last holder is gone). Duplicating MPI_COMM_WORLD
// waits for every rank; a rank missing after `setup_timeout` gives a
// TimeoutError. Throws ConfigError when MPI cannot provide
// MPI_THREAD_MULTIPLE.
std::unique_ptr<Transport> make_mpi_transport(std::chrono::milliseconds setup_timeout);

}  // namespace braid::comm
