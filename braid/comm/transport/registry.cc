#include "braid/comm/transport/registry.h"

#include "braid/base/error.h"
#include "braid/comm/transport/mpi.h"
#include "braid/comm/transport/shm.h"
#include "braid/comm/transport/tcp.h"

namespace braid::comm {

std::vector<std::string> transport_names() { return {"tcp", "shm", "mpi"}; }

std::unique_ptr<Transport> make_transport(std::string_view name, Store* store,
                                          const TransportOptions& o) {
  auto need_store = [&] {
    if (!store) fail<ConfigError>("transport '{}' needs a Store (set MASTER_ADDR/MASTER_PORT)", name);
    return store;
  };
  if (name == "tcp") {
    return make_tcp_transport(*need_store(), {.rank = o.rank, .size = o.size, .host = o.host,
                                              .token = o.token, .prefix = o.prefix,
                                              .connect_timeout = o.connect_timeout,
                                              .streams = o.tcp_streams, .max_message = o.max_message});
  }
  if (name == "shm") {
    return make_shm_transport(*need_store(), {.rank = o.rank, .size = o.size, .prefix = o.prefix,
                                              .ring_bytes = o.shm_ring_bytes,
                                              .max_message = o.max_message,
                                              .connect_timeout = o.connect_timeout});
  }
  if (name == "mpi") return make_mpi_transport(o.connect_timeout);
  fail<ConfigError>("unknown transport '{}' (known: {})", name, fmt::join(transport_names(), ", "));
}

}  // namespace braid::comm
