#include "braid/comm/bootstrap.h"

#include <array>
#include <cstring>

#include <fmt/format.h>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/mpi_session.h"
#include "braid/comm/transport/registry.h"

namespace braid::comm {

namespace {

// Broadcast payload (bytes): "ok\n<token>\n<host>\n<port>" or "error\n<message>".
constexpr size_t kBootstrapBytes = 4096;

// Rank 0 serves the store on host:port (0: any free port). A port in use is
// the likely failure under Slurm, where the port is derived, so say how to
// pick another.
std::unique_ptr<StoreServer> serve(const Env& e, const std::string& host, int port) {
  try {
    return std::make_unique<StoreServer>(StoreServerOptions{.host = host, .port = port, .token = e.token});
  } catch (const IoError& err) {
    fail<IoError>("rank 0 could not serve the rendezvous store on {}:{} ({}); set MASTER_PORT to a free port "
                  "(and MASTER_ADDR to an address of rank 0's host)",
                  host, port, err.what());
  }
}

// Where rank 0 serves the store under mpirun.
std::string mpirun_store_host(const Env& e) {
  if (e.master_addr_given) return e.master_addr;
  if (e.local_size == e.size) return "127.0.0.1";  // every rank on this host: loopback
  if (e.host_given) return e.host;
  fail<ConfigError>("the {} ranks of this mpirun job span several hosts ({} on rank 0's): set BRAID_HOST on every "
                    "rank to its host's address (the tcp transport listens there, and rank 0 serves the store "
                    "there), or MASTER_ADDR to an address of rank 0's host",
                    e.size, e.local_size);
}

// Rank 0 picks token and address, starts the store, and tells the others
// over MPI; an error on rank 0 travels the same way, so every rank fails
// with rank 0's reason instead of waiting for a store that never comes.
void bootstrap_over_mpi(Joined& j, Deadline d) {
  Env& e = j.env;
  std::shared_ptr<MpiSession> mpi = MpiSession::acquire();
  std::string message;
  std::exception_ptr rank0_error;
  if (e.rank == 0) {
    try {
      if (!e.token_given) {
        std::array<std::byte, 16> raw;
        random_bytes(raw);
        e.token = to_hex(raw);
      }
      e.master_addr = mpirun_store_host(e);
      j.server = serve(e, e.master_addr, e.master_port_given ? e.master_port : 0);
      e.master_port = j.server->port();
      message = fmt::format("ok\n{}\n{}\n{}", e.token, e.master_addr, e.master_port);
    } catch (const Error& err) {
      rank0_error = std::current_exception();
      message = fmt::format("error\n{}", err.what());
    }
    if (message.size() >= kBootstrapBytes) message = "error\nBRAID_TOKEN or the store address is too long";
  }
  const std::string who = fmt::format("rank {} of {} (mpirun bootstrap)", e.rank, e.size);
  MPI_Comm comm = mpi->dup_world(d, fmt::format("{}: duplicating MPI_COMM_WORLD; some rank never joined (do all "
                                                "ranks run the same braid command with the same transport?)",
                                                who));
  std::array<char, kBootstrapBytes> buf{};
  std::memcpy(buf.data(), message.data(), message.size());
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Ibcast(buf.data(), static_cast<int>(buf.size()), MPI_CHAR, 0, comm, &req);
  mpi->wait(req, d, fmt::format("{}: MPI_Ibcast of rank 0's store address and token", who));
  MPI_Comm_free(&comm);
  if (rank0_error) std::rethrow_exception(rank0_error);
  message.assign(buf.data(), strnlen(buf.data(), buf.size()));
  if (message.rfind("error\n", 0) == 0)
    fail<ConfigError>("{}: rank 0 could not start the job: {}", who, message.substr(6));
  std::array<std::string, 4> parts;
  size_t start = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const size_t nl = i + 1 < parts.size() ? message.find('\n', start) : message.size();
    if (nl == std::string::npos) fail<PeerError>("{}: malformed bootstrap message from rank 0", who);
    parts[i] = message.substr(start, nl - start);
    start = nl + 1;
  }
  e.token = parts[1];
  e.master_addr = parts[2];
  e.master_port = std::stoi(parts[3]);
  // `mpi` goes out of scope here: unless a transport holds MPI, it is
  // finalized now, so a failing rank later never blocks in MPI_Finalize.
}

// Token and store for tcp and shm; rank 0 serves the store unless a launcher does.
void rendezvous(Joined& j, Deadline d) {
  Env& e = j.env;
  if (e.source == "mpirun" && !(e.token_given && e.master_addr_given && e.master_port_given)) {
    bootstrap_over_mpi(j, d);
  } else {
    if (e.token.empty())
      fail<ConfigError>("rank {}: BRAID_TOKEN is not set; every rank needs the same secret to authenticate "
                        "(braid launch and mpirun provide one, srun derives one from SLURM_JOB_ID; with "
                        "RANK/WORLD_SIZE set by hand, or without SLURM_JOB_ID, set it yourself)",
                        e.rank);
    // Under braid launch the launcher serves the store; elsewhere rank 0 does.
    if (e.source != "launch" && e.rank == 0) j.server = serve(e, e.master_addr, e.master_port);
  }
  StoreOptions so = store_options(e);
  so.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(d.remaining());
  j.store = std::make_unique<Store>(std::move(so));
}

}  // namespace

Joined join_job(const Env& env, const JoinOptions& o) {
  if (env.size < 2) fail<ValueError>("join_job needs 2 or more ranks (world size {})", env.size);
  Joined j;
  j.env = env;
  j.transport_name = o.transport;
  if (o.transport == "auto") j.transport_name = env.local_size == env.size ? "shm" : "tcp";
  const Deadline d = Deadline::after(o.timeout);
  if (j.transport_name != "mpi") rendezvous(j, d);
  TransportOptions to = transport_options(j.env);
  if (o.tcp_streams > 0) to.tcp_streams = o.tcp_streams;
  if (o.max_message > 0) to.max_message = o.max_message;
  to.connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o.timeout);
  j.transport = make_transport(j.transport_name, j.store.get(), to);
  logging::debug("rank {}: joined a group of {} ranks over {} (from {})", env.rank, env.size, j.transport_name,
                 env.source);
  return j;
}

}  // namespace braid::comm
