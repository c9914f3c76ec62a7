// Process-level transports by name: "tcp", "shm", "mpi". (The in-process
// "inproc" transport needs every rank in one process, so it is built by its
// own factory, not here.) Ranks find each other through the Store; "mpi"
// needs none and uses MPI_COMM_WORLD.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "braid/comm/store/store.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

struct TransportOptions {
  int rank = 0;
  int size = 1;
  std::string token{};               // BRAID_TOKEN; tcp authenticates with it
  std::string prefix = "braid";    // store key namespace
  std::string host = "127.0.0.1";  // tcp: address to listen on and advertise
  int tcp_streams = 1;              // tcp: connections per peer (BRAID_TCP_STREAMS)
  size_t shm_ring_bytes = size_t{4} << 20;
  size_t max_message = kDefaultMaxMessage;  // tcp, shm: bound on a peer's early messages (transport.h)
  std::chrono::milliseconds connect_timeout{60000};
};

// Names make_transport accepts.
std::vector<std::string> transport_names();

// Builds the named transport; `store` may be null only for "mpi". Throws
// ConfigError for an unknown name (listing the known ones).
std::unique_ptr<Transport> make_transport(std::string_view name, Store* store,
                                          const TransportOptions& options);

}  // namespace braid::comm
