// mpi: the Transport over Open MPI point-to-point (MPI_Isend/MPI_Irecv on a
// duplicate of MPI_COMM_WORLD), for clusters that already run MPI. Needs
// MPI_THREAD_MULTIPLE: user threads post operations directly and one progress
// thread tests them. MPI's own matching provides FIFO per (source, tag).
//
// Limits: a braid tag is reduced modulo MPI_TAG_UB + 1 (2^31 with Open MPI),
// so two in-flight tags that differ by a multiple of that would collide.
// Messages over 1 GiB travel as several MPI messages.
#pragma once

#include <memory>

#include "braid/comm/transport/transport.h"

namespace braid::comm {

// Initializes MPI (MPI_THREAD_MULTIPLE) unless the program already did, and
// finalizes it at exit in that case. Throws ConfigError when the MPI library
// cannot provide MPI_THREAD_MULTIPLE.
std::unique_ptr<Transport> make_mpi_transport();

}  // namespace braid::comm
