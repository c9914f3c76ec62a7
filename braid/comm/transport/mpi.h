// mpi: the Transport over Open MPI point-to-point (MPI_Isend/MPI_Irecv on a
// duplicate of MPI_COMM_WORLD), for clusters that already run MPI. Needs
// MPI_THREAD_MULTIPLE: user threads post operations directly and one progress
// thread tests them. MPI's own matching provides FIFO per (source, tag).
//
// Limits: a braid tag is reduced modulo MPI_TAG_UB + 1 (2^31 with Open MPI),
// so two in-flight tags that differ by a multiple of that would collide.
// Messages over 1 GiB travel as several MPI messages.
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
