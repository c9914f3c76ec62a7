// The alpha-beta(-gamma) cost model and the all-reduce chooser.
//
// A message of n bytes between two ranks costs alpha + n beta; reducing n bytes
// costs n gamma. Each algorithm's predicted time is the formula in its header;
// the chooser takes the cheapest one for the message size and group size.
// alpha and beta come from CommOptions, from a start-up ping-pong
// (Communicator::calibrate), or from per-transport defaults measured on the
// development machine (see docs/collectives.md).
#pragma once

#include <cstddef>
#include <string_view>

#include "braid/comm/algorithms/algorithms.h"

namespace braid::comm {

struct LinkCost {
  double alpha = 5e-6;        // s per message (latency)
  double beta = 1.0 / 5e9;    // s per byte on the wire (1 / bandwidth)
  double gamma = 1.0 / 8e9;   // s per byte reduced (1 / reduction throughput)
};

// Defaults for a transport by name ("inproc", "shm", "tcp", "mpi"; others get tcp's).
LinkCost default_link_cost(std::string_view transport);

// Predicted seconds for an all-reduce of `bytes` over `p` ranks. `hosts` is
// the number of hosts the group spans (only `hierarchical` uses it; `inter`
// is the link cost between hosts).
double predict_allreduce(Algorithm a, int p, size_t bytes, const LinkCost& intra,
                         const LinkCost& inter, int hosts);

// Cheapest of the all-reduce algorithms for this case; never `automatic`.
// `hierarchical` is only considered when hosts > 1.
Algorithm choose_allreduce(int p, size_t bytes, const LinkCost& intra, const LinkCost& inter, int hosts);

}  // namespace braid::comm
