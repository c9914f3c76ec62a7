// A Channel over one connected stream socket (TCP between ranks; any stream
// socket works, which is how tests drive it over socketpairs). The data path
// of the tcp transport: header and payload leave in one sendmsg straight from
// the caller's buffers, and reads land straight in the caller's buffer.
#pragma once

#include <memory>

#include "braid/comm/transport/channel.h"
#include "braid/comm/transport/socket_util.h"

namespace braid::comm {

// Takes ownership of `fd` (blocking mode; non-blocking calls use MSG_DONTWAIT).
std::unique_ptr<Channel> make_tcp_channel(net::Fd fd);

}  // namespace braid::comm
