#include "braid/comm/store/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <asio.hpp>
#include <cerrno>
#include <atomic>
#include <cstring>
#include <list>
#include <optional>
#include <thread>
#include <unordered_map>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/base/thread_name.h"
#include "braid/comm/store/protocol.h"
#include "braid/comm/store/requests.h"

namespace braid::comm {

using asio::ip::tcp;
using store::Op;
using store::Status;

namespace {

class Session;

// A client blocked in kWait until all `keys` exist or its timer fires.
struct Waiter {
  std::shared_ptr<Session> session;
  std::vector<std::string> keys;
  std::unique_ptr<asio::steady_timer> timer;
  bool done = false;
};

}  // namespace

struct StoreServer::Impl {
  StoreServerOptions opts;
  // Frame bytes held by all sessions (opts.max_buffered); open connections per
  // remote address (opts.max_connections_per_host). Both on the io thread
  // only, and declared before `io` and `waiters`: sessions that outlive the
  // thread are destroyed with them, and give back their share here.
  uint64_t buffered = 0;
  std::unordered_map<std::string, int> connections;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  store::KeyValues kv;
  std::list<std::shared_ptr<Waiter>> waiters;
  std::atomic<int64_t> rejected{0};
  int port = 0;
  std::thread thread;
  bool stopped = false;

  void accept();
  void admit(tcp::socket socket);
  void notify_waiters();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(StoreServer::Impl& server, tcp::socket socket, std::string host)
      : server_(server), socket_(std::move(socket)), auth_timer_(server.io), host_(std::move(host)) {
    asio::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
    ++server_.connections[host_];
  }
  ~Session() {
    release(held_);
    if (--server_.connections[host_] == 0) server_.connections.erase(host_);
  }

  void start() {
    random_bytes(nonce_);
    auto self = shared_from_this();
    auth_timer_.expires_after(server_.opts.auth_timeout);
    auth_timer_.async_wait([self](asio::error_code ec) {
      if (!ec && !self->authed_) self->reject("did not authenticate in time");
    });
    asio::async_write(socket_, asio::buffer(nonce_), [self](asio::error_code ec, size_t) {
      if (ec) return self->close();
      asio::async_read(self->socket_, asio::buffer(self->mac_),
                       [self](asio::error_code ec2, size_t) { self->on_mac(ec2); });
    });
  }

  // Sends a response frame, then reads the next request.
  void respond(Status status, const std::vector<std::string>& fields) {
    out_ = store::encode(static_cast<uint8_t>(status), fields);
    if (!reserve(out_.size())) {
      const uint64_t n = out_.size();
      std::string().swap(out_);
      return reject_with_error(busy("a reply", n));
    }
    prefix_ = store::length_prefix(static_cast<uint32_t>(out_.size()));
    auto self = shared_from_this();
    std::array<asio::const_buffer, 2> bufs{asio::buffer(prefix_), asio::buffer(out_)};
    asio::async_write(socket_, bufs, [self](asio::error_code ec, size_t) {
      self->drop_frames();
      if (ec) return self->close();
      self->read_request();
    });
  }

 private:
  void on_mac(asio::error_code ec) {
    if (ec) return close();
    Sha256 got;
    std::memcpy(got.data(), mac_.data(), got.size());
    bool ok = equal_digests(got, store::auth_mac(server_.opts.token, "braid-store", nonce_));
    auth_reply_[0] = ok ? store::kAuthOk : store::kAuthRejected;
    if (ok) {
      authed_ = true;
      auth_timer_.cancel();
    }
    if (!ok) {
      // Counted and logged before the answer goes out, so a client that sees
      // the rejection also sees it counted.
      logging::warn("store: rejecting {}: wrong token", peer_);
      ++server_.rejected;
    }
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(auth_reply_), [self, ok](asio::error_code ec2, size_t) {
      if (!ok) return self->close();
      if (ec2) return self->close();
      self->read_request();
    });
  }

  void read_request() {
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_), [self](asio::error_code ec, size_t) {
      if (ec) return self->close();
      uint32_t n = store::read_length(self->header_);
      if (n > self->server_.opts.max_frame) {
        // Answer before dropping, so an honest client learns why.
        self->reject_with_error(fmt::format("frame of {} bytes exceeds the store's limit of {}",
                                            n, self->server_.opts.max_frame));
        return;
      }
      if (!self->reserve(n)) return self->reject_with_error(self->busy("a request", n));
      self->body_.resize(n);
      asio::async_read(self->socket_, asio::buffer(self->body_),
                       [self](asio::error_code ec2, size_t) {
                         if (ec2) return self->close();
                         self->handle();
                       });
    });
  }

  void handle() {
    store::Outcome out;
    try {
      out = store::apply(server_.kv, store::decode(body_));
    } catch (const PeerError& e) {
      return reject(e.what());
    }
    drop_frames();  // the request is applied: its bytes are the key-value map's now
    if (out.changed) server_.notify_waiters();
    switch (out.kind) {
      case store::Outcome::Kind::respond: return respond(out.status, out.fields);
      case store::Outcome::Kind::reject: return reject(out.why);
      case store::Outcome::Kind::wait: return wait(std::move(out.fields), out.wait_ms);
    }
  }

  void wait(std::vector<std::string> keys, int64_t ms) {
    auto w = std::make_shared<Waiter>();
    w->session = shared_from_this();
    w->keys = std::move(keys);
    w->timer = std::make_unique<asio::steady_timer>(server_.io);
    w->timer->expires_after(std::chrono::milliseconds(ms));
    server_.waiters.push_back(w);
    auto* server = &server_;
    w->timer->async_wait([server, w](asio::error_code ec) {
      if (ec || w->done) return;
      w->done = true;
      server->waiters.remove(w);
      auto session = std::move(w->session);
      session->respond(Status::kTimeout, server->kv.missing(w->keys));
    });
  }

  void reject_with_error(std::string why) {
    logging::warn("store: rejecting {}: {}", peer_, why);
    ++server_.rejected;
    out_ = store::encode(static_cast<uint8_t>(Status::kError), {why});
    prefix_ = store::length_prefix(static_cast<uint32_t>(out_.size()));
    auto self = shared_from_this();
    std::array<asio::const_buffer, 2> bufs{asio::buffer(prefix_), asio::buffer(out_)};
    asio::async_write(socket_, bufs, [self](asio::error_code, size_t) { self->close(); });
  }

  void reject(const std::string& why) {
    logging::warn("store: rejecting {}: {}", peer_, why);
    ++server_.rejected;
    close();
  }

  void close() {
    asio::error_code ec;
    auth_timer_.cancel();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
    // The frames are given back when the session goes (~Session): a read
    // may still be pending on body_.
  }

  // Frames up to this size pass the total bound (StoreServerOptions::max_buffered).
  static constexpr uint64_t kSmallFrame = 64 << 10;

  // Charges `n` more frame bytes to the server-wide bound; false (nothing
  // charged) when they would pass it.
  bool reserve(uint64_t n) {
    if (n > kSmallFrame && server_.buffered + n > server_.opts.max_buffered) return false;
    server_.buffered += n;
    held_ += n;
    return true;
  }
  void release(uint64_t n) {
    server_.buffered -= n;
    held_ -= n;
  }
  // Gives back the request and reply frames (their memory too: one large
  // frame must not stay allocated for the connection's life).
  void drop_frames() {
    release(held_);
    std::string().swap(body_);
    std::string().swap(out_);
  }
  std::string busy(const char* what, uint64_t n) const {
    return fmt::format("store busy: {} of {} bytes would take the frames held over all connections past the "
                       "store's bound of {} bytes ({} held now)",
                       what, n, server_.opts.max_buffered, server_.buffered);
  }

  StoreServer::Impl& server_;
  tcp::socket socket_;
  asio::steady_timer auth_timer_;
  std::string host_;  // the remote address, for StoreServer::Impl::connections
  std::string peer_;
  uint64_t held_ = 0;  // bytes charged to server_.buffered
  bool authed_ = false;
  std::array<std::byte, store::kNonceBytes> nonce_{};
  std::array<std::byte, 32> mac_{};
  std::array<uint8_t, 1> auth_reply_{};
  std::array<std::byte, 4> header_{};
  std::array<std::byte, 4> prefix_{};
  std::string body_, out_;
};

}  // namespace

// accept4 rather than asio's accept: the socket is close-on-exec from the
// start, since `braid launch` forks ranks while this thread accepts.
void StoreServer::Impl::accept() {
  acceptor.async_wait(tcp::acceptor::wait_read, [this](asio::error_code ec) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      logging::warn("store: accept failed: {}", ec.message());
    } else if (int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC); fd >= 0) {
      tcp::socket socket(io);
      asio::error_code aec;
      socket.assign(acceptor.local_endpoint().protocol(), fd, aec);
      if (aec) {
        ::close(fd);
        logging::warn("store: accept failed: {}", aec.message());
      } else {
        admit(std::move(socket));
      }
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      logging::warn("store: accept failed: {}", std::strerror(errno));
    }
    accept();
  });
}

void StoreServer::Impl::admit(tcp::socket socket) {
  asio::error_code ec;
  const auto ep = socket.remote_endpoint(ec);
  const std::string host = ec ? std::string("?") : ep.address().to_string();
  if (auto it = connections.find(host); it != connections.end() && it->second >= opts.max_connections_per_host) {
    logging::warn("store: rejecting {}:{}: {} connections from that address already (the store's bound)", host,
                  ec ? 0 : ep.port(), it->second);
    ++rejected;
    socket.close(ec);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);
  std::make_shared<Session>(*this, std::move(socket), host)->start();
}

void StoreServer::Impl::notify_waiters() {
  for (auto it = waiters.begin(); it != waiters.end();) {
    auto w = *it;
    if (!kv.missing(w->keys).empty()) {
      ++it;
      continue;
    }
    it = waiters.erase(it);
    w->done = true;
    w->timer->cancel();
    auto session = std::move(w->session);
    session->respond(Status::kOk, {});
  }
}

StoreServer::StoreServer(StoreServerOptions options) : impl_(std::make_unique<Impl>()) {
  if (options.token.empty()) fail<ConfigError>("store server: empty token (set BRAID_TOKEN)");
  impl_->opts = std::move(options);
  auto& o = impl_->opts;
  impl_->kv.max_bytes = o.max_bytes;
  try {
    tcp::resolver resolver(impl_->io);
    auto endpoints = resolver.resolve(o.host, std::to_string(o.port));
    tcp::endpoint ep = endpoints.begin()->endpoint();
    // Opened here, close-on-exec from the start: the ranks `braid launch`
    // forks must not inherit the store's port.
    const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
    impl_->acceptor.assign(ep.protocol(), fd);
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl_->acceptor.bind(ep);
    impl_->acceptor.listen();
    impl_->acceptor.non_blocking(true);  // accept4 after a wake-up that another took
    impl_->port = impl_->acceptor.local_endpoint().port();
  } catch (const std::system_error& e) {
    fail<IoError>("store server: cannot listen on {}:{}: {}", o.host, o.port, e.what());
  }
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] {
    name_this_thread("store-server");
    try {
      impl->io.run();
    } catch (const std::exception& e) {
      logging::error("store server stopped: {}", e.what());
    }
  });
  logging::debug("store: serving on {}:{}", o.host, impl_->port);
}

StoreServer::~StoreServer() { stop(); }

void StoreServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

int StoreServer::port() const { return impl_->port; }
const std::string& StoreServer::host() const { return impl_->opts.host; }
int64_t StoreServer::rejected() const { return impl_->rejected.load(); }

}  // namespace braid::comm
