// The store server's bounds over all connections, not per frame, and its
// sockets close-on-exec. Before: 40 authenticated connections announcing
// 16 MiB frames drove the launcher to 829 MB, and the listening socket leaked
// into every rank `braid launch` forked.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <asio.hpp>
#include <filesystem>
#include <thread>

#include "braid/base/error.h"
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/server.h"
#include "braid/comm/store/store.h"

namespace braid::comm {
namespace {

using namespace std::chrono_literals;
using asio::ip::tcp;

// A raw client that has passed the token challenge.
struct Raw {
  asio::io_context io;
  tcp::socket sock{io};
  explicit Raw(int port, const std::string& token = "secret") {
    sock.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
    std::array<std::byte, store::kNonceBytes> nonce;
    asio::read(sock, asio::buffer(nonce));
    auto mac = store::auth_mac(token, "braid-store", nonce);
    asio::write(sock, asio::buffer(mac));
    std::array<uint8_t, 1> ok{};
    asio::read(sock, asio::buffer(ok));
    BRAID_CHECK_EQ(ok[0], store::kAuthOk);
  }
  // Announces a frame of `n` bytes and sends none of it.
  void announce(uint32_t n) {
    auto prefix = store::length_prefix(n);
    asio::write(sock, asio::buffer(prefix));
  }
  // The error frame the server answers with before it closes, or "" when it
  // said nothing within `wait` (it is still reading our frame).
  std::string refusal(std::chrono::milliseconds wait) {
    sock.non_blocking(true);
    std::array<std::byte, 4> hdr;
    size_t got = 0;
    const auto end = Clock::now() + wait;
    while (got < hdr.size() && Clock::now() < end) {
      asio::error_code ec;
      got += sock.read_some(asio::buffer(hdr.data() + got, hdr.size() - got), ec);
      if (ec && ec != asio::error::would_block) return "closed: " + ec.message();
      if (got < hdr.size()) std::this_thread::sleep_for(5ms);
    }
    if (got < hdr.size()) return "";
    sock.non_blocking(false);
    std::string body(store::read_length(hdr), '\0');
    asio::read(sock, asio::buffer(body));
    auto resp = store::decode(body);
    return resp.fields.empty() ? "?" : resp.fields[0];
  }
};

TEST(StoreBounds, FramesHeldOverAllConnectionsAreBounded) {
  StoreServer server({.token = "secret", .max_frame = 16u << 20, .max_buffered = 40u << 20});
  std::vector<std::unique_ptr<Raw>> held;
  for (int i = 0; i < 2; ++i) {  // 32 MiB of 40: both are read
    held.push_back(std::make_unique<Raw>(server.port()));
    held.back()->announce(16u << 20);
    EXPECT_EQ(held.back()->refusal(100ms), "") << "connection " << i;
  }
  Raw third(server.port());  // 48 MiB would pass the bound
  third.announce(16u << 20);
  const std::string why = third.refusal(2000ms);
  EXPECT_NE(why.find("store busy"), std::string::npos) << why;
  EXPECT_NE(why.find("41943040"), std::string::npos) << why;  // names the bound
  EXPECT_GE(server.rejected(), 1);
  // Small requests still pass, and honest clients are served.
  Store good({.port = server.port(), .token = "secret", .connect_timeout = 2000ms, .timeout = 2000ms});
  good.set("k", "v");
  EXPECT_EQ(good.get("k"), "v");
  // A connection that goes gives its share back.
  held.pop_back();
  std::this_thread::sleep_for(100ms);
  Raw fourth(server.port());
  fourth.announce(16u << 20);
  EXPECT_EQ(fourth.refusal(200ms), "");
}

TEST(StoreBounds, ConnectionsPerAddressAreBounded) {
  StoreServer server({.token = "secret", .max_connections_per_host = 3});
  std::vector<std::unique_ptr<Raw>> open;
  for (int i = 0; i < 3; ++i) open.push_back(std::make_unique<Raw>(server.port()));
  // The fourth is closed at once, before the challenge.
  asio::io_context io;
  tcp::socket sock(io);
  sock.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server.port())});
  std::array<std::byte, store::kNonceBytes> nonce;
  asio::error_code ec;
  asio::read(sock, asio::buffer(nonce), ec);
  EXPECT_TRUE(ec) << "a fourth connection from one address was served";
  EXPECT_GE(server.rejected(), 1);
  open.pop_back();  // one goes: there is room again
  std::this_thread::sleep_for(100ms);
  EXPECT_NO_THROW(Raw again(server.port()));
}

// The local (or, for `peer`, remote) port of socket `fd`; -1 when it is none.
int port_of(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) return -1;
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return -1;
}

TEST(StoreBounds, EverySocketIsCloseOnExec) {
  StoreServer server({.token = "secret"});
  Store client({.port = server.port(), .token = "secret", .connect_timeout = 2000ms, .timeout = 2000ms});
  client.set("k", "v");  // the server has accepted the connection
  int listening_or_accepted = 0, connected = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(e.path().filename().string());
    const bool ours = port_of(fd, false) == server.port();
    const bool theirs = port_of(fd, true) == server.port();
    if (!ours && !theirs) continue;
    listening_or_accepted += ours, connected += theirs;
    EXPECT_TRUE(::fcntl(fd, F_GETFD) & FD_CLOEXEC) << "socket fd " << fd << " (port " << server.port()
                                                   << (ours ? ", the server's" : ", the client's")
                                                   << ") is inherited by exec";
  }
  EXPECT_GE(listening_or_accepted, 2);  // the listening socket and the accepted one
  EXPECT_GE(connected, 1);
}

}  // namespace
}  // namespace braid::comm
