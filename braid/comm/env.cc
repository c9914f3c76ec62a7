#include "braid/comm/env.h"

#include <charconv>
#include <cstdlib>

#include "braid/base/error.h"
#include "braid/comm/transport/tcp.h"

namespace braid::comm {

namespace {

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int get_int(const char* name, int fallback) {
  const char* v = get(name);
  if (!v) return fallback;
  int out = 0;
  std::string_view s(v);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || p != s.data() + s.size())
    fail<ConfigError>("environment variable {}='{}' is not an integer", name, v);
  return out;
}

}  // namespace

Env read_env() {
  Env e;
  if (get("RANK") || get("WORLD_SIZE")) {
    e.source = "launch";
    e.rank = get_int("RANK", 0);
    e.size = get_int("WORLD_SIZE", 1);
    e.local_rank = get_int("LOCAL_RANK", e.rank);
    e.local_size = get_int("LOCAL_WORLD_SIZE", e.size);
  } else if (get("OMPI_COMM_WORLD_RANK")) {
    e.source = "mpirun";
    e.rank = get_int("OMPI_COMM_WORLD_RANK", 0);
    e.size = get_int("OMPI_COMM_WORLD_SIZE", 1);
    e.local_rank = get_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_size = get_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1);
  } else if (get("SLURM_PROCID")) {
    e.source = "slurm";
    e.rank = get_int("SLURM_PROCID", 0);
    e.size = get_int("SLURM_NTASKS", 1);
    e.local_rank = get_int("SLURM_LOCALID", 0);
    e.local_size = get_int("SLURM_NTASKS_PER_NODE", 1);
  }
  if (e.size < 1) fail<ConfigError>("world size {} < 1 (from {})", e.size, e.source);
  if (e.rank < 0 || e.rank >= e.size)
    fail<ConfigError>("rank {} is outside world size {} (from {})", e.rank, e.size, e.source);
  if (const char* a = get("MASTER_ADDR")) e.master_addr = a;
  e.master_port = get_int("MASTER_PORT", e.master_port);
  if (e.master_port <= 0 || e.master_port > 65535)
    fail<ConfigError>("MASTER_PORT={} is not a TCP port", e.master_port);
  if (const char* t = get("BRAID_TOKEN")) e.token = t;
  if (const char* h = get("BRAID_HOST")) e.host = h;
  e.tcp_streams = get_int("BRAID_TCP_STREAMS", 1);
  if (e.tcp_streams < 1 || e.tcp_streams > kMaxTcpStreams)
    fail<ConfigError>("BRAID_TCP_STREAMS={} is outside 1..{} (tcp connections per peer)", e.tcp_streams,
                      kMaxTcpStreams);
  e.restart = get_int("BRAID_RESTART", 0);
  e.ps_servers = get_int("BRAID_PS_SERVERS", 0);
  if (e.ps_servers < 0 || (e.ps_servers > 0 && e.ps_servers >= e.size))
    fail<ConfigError>("BRAID_PS_SERVERS={} leaves no worker in a world of {} ranks", e.ps_servers, e.size);
  return e;
}

StoreOptions store_options(const Env& env) {
  return {.host = env.master_addr, .port = env.master_port, .token = env.token,
          .who = fmt::format("rank {}", env.rank)};
}

TransportOptions transport_options(const Env& env) {
  return {.rank = env.rank, .size = env.size, .token = env.token,
          .prefix = fmt::format("braid/restart{}", env.restart), .host = env.host,
          .tcp_streams = env.tcp_streams};
}

}  // namespace braid::comm
