#include "braid/linear/ranks.h"

#include "braid/base/error.h"

namespace braid::linear_model {

void wait_for(comm::Communicator& comm, const comm::Work& work, const std::string& what) {
  // The collective has its own timeout; the wait's deadline is a backstop.
  try {
    work.wait(Deadline::after(comm.options().timeout * 2));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("rank {} of {}: {}: {}", comm.rank(), comm.size(), what, e.what());
  } catch (const PeerError& e) {
    fail<PeerError>("rank {} of {}: {}: {}", comm.rank(), comm.size(), what, e.what());
  }
}

void sum_over(comm::Communicator& comm, std::span<double> v, const std::string& what) {
  if (comm.size() == 1 || v.empty()) return;
  wait_for(comm, comm.allreduce(comm::BufferRef(v)), what);
}

double sum_over(comm::Communicator& comm, double v, const std::string& what) {
  sum_over(comm, std::span(&v, 1), what);
  return v;
}

void broadcast_from(comm::Communicator& comm, std::span<double> v, int root, const std::string& what) {
  if (comm.size() == 1 || v.empty()) return;
  wait_for(comm, comm.broadcast(comm::BufferRef(v), {.root = root}), what);
}

}  // namespace braid::linear_model
