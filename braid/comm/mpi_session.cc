#include "braid/comm/mpi_session.h"

#include <mpi.h>

#include <mutex>
#include <thread>

#include "braid/base/error.h"

namespace braid::comm {

namespace {

std::mutex g_mu;
std::weak_ptr<MpiSession> g_session;  // guarded by g_mu

}  // namespace

std::shared_ptr<MpiSession> MpiSession::acquire() {
  std::lock_guard l(g_mu);
  if (auto s = g_session.lock()) return s;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    fail<ConfigError>("MPI was already finalized in this process; it cannot be initialized again (keep the "
                      "first mpi transport or process group alive instead of making a new one)");
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    MPI_Query_thread(&provided);
  } else if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided); rc != MPI_SUCCESS) {
    fail<ConfigError>("MPI_Init_thread failed with code {}", rc);
  }
  if (provided < MPI_THREAD_MULTIPLE)
    fail<ConfigError>("braid needs MPI_THREAD_MULTIPLE; this MPI provides level {}", provided);
  auto s = std::shared_ptr<MpiSession>(new MpiSession(!initialized));
  g_session = s;
  return s;
}

void MpiSession::wait(MPI_Request& request, Deadline d, std::string_view what) {
  const auto t0 = Clock::now();
  while (true) {
    int done = 0;
    if (int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS)
      fail<PeerError>("{}: MPI_Test failed with code {}", what, rc);
    if (done) return;
    if (d.expired()) {
      abandoned_ = true;
      fail<TimeoutError>("{}: not complete after {}", what, format_duration(Clock::now() - t0));
    }
    // Bootstrap-sized calls finish in microseconds once every rank is there;
    // a 1 ms nap keeps a rank that arrived early off the CPU.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

MPI_Comm MpiSession::dup_world(Deadline d, std::string_view what) {
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Comm_idup(MPI_COMM_WORLD, &comm, &req);
  wait(req, d, what);
  return comm;
}

MpiSession::~MpiSession() {
  std::lock_guard l(g_mu);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owns_ && !abandoned_ && !finalized) MPI_Finalize();
}

}  // namespace braid::comm
