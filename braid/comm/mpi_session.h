// The one place that initializes and finalizes MPI. MPI can be initialized
// once per process and never again after MPI_Finalize, so this is process
// state by nature, not by choice: the mpi transport and the bootstrap under
// mpirun (bootstrap.h) each hold a session while they use MPI, and the last
// holder to let go finalizes it.
#pragma once

#include <mpi.h>

#include <atomic>
#include <memory>
#include <string_view>

#include "braid/base/deadline.h"

namespace braid::comm {

class MpiSession {
 public:
  // The session of this process: MPI_Init_thread(MPI_THREAD_MULTIPLE, since
  // the mpi transport posts from user threads and tests on its own) the
  // first time. Throws ConfigError when MPI cannot provide that level, or
  // when MPI was already finalized in this process.
  static std::shared_ptr<MpiSession> acquire();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // Waits for a nonblocking MPI call (MPI_Comm_idup, MPI_Ibcast: their
  // blocking forms have no deadline). On the deadline throws TimeoutError
  // "<what>: not complete after <waited>" and abandons the session: MPI_Finalize
  // could then wait for the missing rank forever, so the process leaves MPI
  // unfinalized (mpirun says so) rather than hang on its way out.
  void wait(MPI_Request& request, Deadline d, std::string_view what);
  // A private duplicate of MPI_COMM_WORLD (so its messages never match the
  // program's own), made with MPI_Comm_idup under `d`: MPI_Comm_dup would
  // wait for every rank with no deadline. `what` as for wait().
  MPI_Comm dup_world(Deadline d, std::string_view what);
  // Leaves MPI unfinalized at the end, for the same reason, after any call
  // that could not be finished.
  void abandon() { abandoned_ = true; }

 private:
  explicit MpiSession(bool owns) : owns_(owns) {}
  bool owns_;  // we initialized MPI, so we finalize it (not when the program did)
  std::atomic<bool> abandoned_{false};
};

}  // namespace braid::comm
