// The collectives the distributed linear solvers use: sums of f64 vectors
// whose waits have deadlines and whose errors say which rank waited for what.
#pragma once

#include <span>
#include <string>

#include "braid/comm/communicator.h"

namespace braid::linear_model {

// In place: every rank gets the element-wise sum. `what` names the exchange
// in errors ("cocoa round 3: the w update").
void sum_over(comm::Communicator& comm, std::span<double> v, const std::string& what);
double sum_over(comm::Communicator& comm, double v, const std::string& what);
// In place: every rank gets `root`'s values.
void broadcast_from(comm::Communicator& comm, std::span<double> v, int root, const std::string& what);
// Waits for a point-to-point exchange the same way.
void wait_for(comm::Communicator& comm, const comm::Work& work, const std::string& what);

}  // namespace braid::linear_model
