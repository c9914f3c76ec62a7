// The machine a simulated step runs on: ranks packed onto hosts, the cores
// each host's ranks share, and the links between ranks (docs/sim.md).
//
// Inside a host a message goes from the sender's port to the receiver's port
// (shared memory: each rank copies at the intra-host bandwidth). Between hosts
// it leaves through the sender host's network interface and enters through the
// receiver host's, and those are shared by every rank of the host: eight ranks
// sending off-host at once get an eighth of the interface each.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "braid/comm/cost_model.h"
#include "braid/comm/transport/stream.h"
#include "braid/comm/work.h"

namespace braid::sim {

// The CPU a message costs each of its two ends (LogP's overhead o, and the
// copies a transport makes): seconds per message and per byte, on the
// sending and on the receiving rank's host. A message cannot stream faster
// than one thread at each end copies it, and while it streams it takes its
// share of the host's cores from compute (engine.h). Zero: the network
// moves the bytes (an RDMA NIC), as a described cluster's links default to.
struct MessageCpu {
  double per_message = 0;
  double per_byte = 0;
  bool any() const { return per_message > 0 || per_byte > 0; }
  // One end's CPU seconds for a message of `bytes`.
  double seconds(double bytes) const { return per_message + per_byte * bytes; }
};

struct Cluster {
  int ranks = 1;
  int ranks_per_host = 1;     // hosts = ceil(ranks / ranks_per_host); rank r is on host r / ranks_per_host
  double cores_per_host = 2;  // compute of a host's ranks is shared out over these cores
  comm::LinkCost intra = comm::default_link_cost("shm");  // alpha s/message, beta s/byte, gamma s/byte reduced
  comm::LinkCost inter = comm::default_link_cost("tcp");  // between hosts, per host interface
  MessageCpu intra_cpu{}, inter_cpu{};                    // of a message inside a host, between hosts
  // A thread waiting for a message by itself (Simulator::transfer's
  // `awaited`) reads for it this long before it sleeps, as braid's stream
  // transports do (their poll, then Work::wait's own spin), seconds...
  double poll = std::chrono::duration<double>(comm::StreamTransport::kPollFor + comm::Work::kSpinBeforeSleep).count();
  // ... and what a message that arrives later waits on top: the transport's
  // wake-up of a sleeping receiver, seconds.
  double intra_wake = 0, inter_wake = 0;
  // A group inside one host all-reduces through shared memory, as braid's
  // communicator does by default over the shm transport.
  bool shared_memory = false;
  // Per rank: how much longer its compute takes (1 = as measured); empty = all 1.
  std::vector<double> slowdown{};

  int hosts() const { return (ranks + ranks_per_host - 1) / ranks_per_host; }
  int host_of(int rank) const { return rank / ranks_per_host; }
  double slowdown_of(int rank) const {
    return slowdown.empty() ? 1.0 : slowdown.at(static_cast<size_t>(rank));
  }
  // "4 ranks on 1 host of 2 cores; in-host 8.0 GB/s, 3 us; between hosts 1.25 GB/s, 25 us"
  std::string describe() const;
};

// A link as people write it: "10Gbit/s,5us", "100Gbit/s", "1.2GB/s,30us",
// "800MiB/s,2ms". Bandwidth units: bit/s, kbit/s, Mbit/s, Gbit/s (powers of
// 1000, bits), B/s, KB/s, MB/s, GB/s (1000, bytes), KiB/s, MiB/s, GiB/s (1024);
// latency: ns, us, ms, s. What the spec leaves out keeps `base`'s value.
// ValueError naming the spec otherwise.
comm::LinkCost parse_link(std::string_view spec, comm::LinkCost base);

}  // namespace braid::sim
