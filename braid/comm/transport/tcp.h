// tcp: the Transport between machines (or processes) over TCP sockets.
//
// Set-up: each rank listens on `host` (loopback unless told otherwise),
// publishes "host:port" through the Store, and connects to every lower rank;
// the connecting side proves it knows the token (HMAC-SHA256 over the
// acceptor's nonce, its own rank and the stream index) before the acceptor
// takes the connection.
// Data path: StreamTransport (stream.h): per peer one socket (or `streams`
// sockets striped into one byte stream, striped_channel.h), one sender and
// one reader thread; payloads go from the user's buffer to the socket and from
// the socket into the posted receive buffer without staging copies.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "braid/comm/store/store.h"
#include "braid/comm/transport/transport.h"

namespace braid::comm {

// Upper bound on TcpOptions::streams: past a few streams per peer nothing
// more is gained, and each costs a socket and its buffers per peer.
constexpr int kMaxTcpStreams = 16;

struct TcpOptions {
  int rank = 0;
  int size = 1;
  // Address to listen on and advertise to the peers.
  std::string host = "127.0.0.1";
  std::string token{};
  // Store key namespace (distinct per group and per restart).
  std::string prefix = "braid";
  // Whole set-up: address exchange, connects, accepts, handshakes.
  std::chrono::milliseconds connect_timeout{60000};
  // TCP connections per peer, striped into one stream (striped_channel.h);
  // every rank must use the same number. More than 1 helps only where one
  // flow cannot fill the link (docs/communication.md, "Several streams").
  int streams = 1;
  // Bound on what a peer's early messages may make us buffer (transport.h).
  size_t max_message = kDefaultMaxMessage;
};

std::unique_ptr<Transport> make_tcp_transport(Store& store, const TcpOptions& options);

}  // namespace braid::comm
