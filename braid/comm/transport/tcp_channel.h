// A Channel over one connected stream socket (TCP between ranks; any stream
// socket works, which is how tests drive it over socketpairs). The data path
// of the tcp transport: header and payload leave in one sendmsg straight from
// the caller's buffers, and reads land straight in the caller's buffer.
#pragma once

#include "braid/comm/transport/channel.h"
#include "braid/comm/transport/socket_util.h"

namespace braid::comm {

class TcpChannel final : public Channel {
 public:
  // Takes ownership of `fd` (blocking mode; non-blocking calls use MSG_DONTWAIT).
  explicit TcpChannel(net::Fd fd);

  size_t try_write(ConstBytes a, ConstBytes b) override;
  void write(ConstBytes a, ConstBytes b) override;
  size_t try_read(std::span<std::byte> out) override;
  bool wait_readable(std::chrono::milliseconds timeout) override;
  void close_write() override;
  void shutdown() override;

  // The socket, for waiting on several channels at once (striped_channel.h).
  int fd() const { return fd_.get(); }

 private:
  net::Fd fd_;
};

}  // namespace braid::comm
