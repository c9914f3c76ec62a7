#include "braid/comm/store/store.h"

#include <fcntl.h>

#include <asio.hpp>
#include <charconv>
#include <cstring>
#include <mutex>
#include <thread>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/store/protocol.h"

namespace braid::comm {

using asio::ip::tcp;
using store::Op;
using store::Status;

struct Store::Impl {
  StoreOptions opts;
  asio::io_context io;
  std::optional<tcp::socket> socket;
  std::mutex mu;

  std::string where() const { return fmt::format("store {}:{}", opts.host, opts.port); }

  void drop() {
    if (!socket) return;
    asio::error_code ec;
    socket->close(ec);
    io.restart();
    io.run();  // lets cancelled handlers finish before their state goes away
    socket.reset();
  }

  // Runs the event loop until `done` or the deadline; on the deadline drops the
  // connection (it is out of step mid-frame) and throws TimeoutError.
  void run(const bool& done, Deadline d, std::string_view what, Clock::time_point start) {
    io.restart();
    while (!done) {
      if (d.expired()) {
        drop();
        fail<TimeoutError>("{}: {} on {} timed out after {}", opts.who, what, where(),
                           format_duration(Clock::now() - start));
      }
      auto left = std::min<Duration>(d.remaining(), std::chrono::seconds(1));
      io.run_one_for(left);
    }
  }

  // Starts one async operation via `start(handler)` and waits for it.
  template <class Start>
  void step(Start start, Deadline d, std::string_view what, Clock::time_point t0) {
    bool done = false;
    asio::error_code err;
    start([&](asio::error_code ec, size_t) {
      err = ec;
      done = true;
    });
    run(done, d, what, t0);
    if (err) {
      drop();
      fail<PeerError>("{}: {} on {} failed: {}", opts.who, what, where(), err.message());
    }
  }

  void connect(Deadline d) {
    auto t0 = Clock::now();
    std::string last_error = "no attempt";
    bool warned = false;
    while (true) {
      socket.emplace(io);
      try {
        tcp::resolver resolver(io);
        auto eps = resolver.resolve(opts.host, std::to_string(opts.port));
        step([&](auto h) { asio::async_connect(*socket, eps, [h](asio::error_code ec, const tcp::endpoint&) { h(ec, 0); }); },
             d, "connect", t0);
        break;
      } catch (const PeerError& e) {
        last_error = e.what();
      } catch (const std::system_error& e) {
        last_error = e.what();
        drop();
      }
      if (d.expired()) {
        fail<TimeoutError>("{}: could not reach {} within {} (last error: {})", opts.who, where(),
                           format_duration(Clock::now() - t0), last_error);
      }
      // Ranks may start a little before the server, but not seconds before:
      // say once what we are waiting for, so a long wait is never silent.
      if (!warned && Clock::now() - t0 > std::chrono::seconds(5)) {
        warned = true;
        logging::warn("{}: {} not reachable yet ({}); retrying for {} more", opts.who, where(), last_error,
                      format_duration(d.remaining()));
      }
      std::this_thread::sleep_for(std::min<Duration>(d.remaining(), std::chrono::milliseconds(100)));
    }
    socket->set_option(tcp::no_delay(true));
    // Close-on-exec, as every braid socket: a launcher on node > 0 talks to
    // the store before it forks its ranks. (asio opens the socket itself;
    // nothing here forks between its connect and this line.)
    ::fcntl(socket->native_handle(), F_SETFD, ::fcntl(socket->native_handle(), F_GETFD) | FD_CLOEXEC);
    std::array<std::byte, store::kNonceBytes> nonce;
    step([&](auto h) { asio::async_read(*socket, asio::buffer(nonce), h); }, d, "auth (nonce)", t0);
    Sha256 mac = store::auth_mac(opts.token, "braid-store", nonce);
    step([&](auto h) { asio::async_write(*socket, asio::buffer(mac), h); }, d, "auth (mac)", t0);
    std::array<uint8_t, 1> reply{};
    try {
      step([&](auto h) { asio::async_read(*socket, asio::buffer(reply), h); }, d, "auth (reply)", t0);
    } catch (const PeerError&) {
      reply[0] = store::kAuthRejected;
    }
    if (reply[0] != store::kAuthOk) {
      drop();
      fail<PeerError>("{}: {} rejected the token (check BRAID_TOKEN)", opts.who, where());
    }
  }

  store::Decoded request(Op op, const std::vector<std::string>& fields, Deadline d,
                         std::string_view what) {
    std::lock_guard lock(mu);
    auto t0 = Clock::now();
    if (!socket) connect(d);
    std::string payload = store::encode(static_cast<uint8_t>(op), fields);
    auto prefix = store::length_prefix(static_cast<uint32_t>(payload.size()));
    std::array<asio::const_buffer, 2> bufs{asio::buffer(prefix), asio::buffer(payload)};
    step([&](auto h) { asio::async_write(*socket, bufs, h); }, d, what, t0);
    std::array<std::byte, 4> header;
    step([&](auto h) { asio::async_read(*socket, asio::buffer(header), h); }, d, what, t0);
    uint32_t n = store::read_length(header);
    if (n > opts.max_frame) {
      drop();
      fail<PeerError>("{}: {} answered {} with a {}-byte frame (limit {})", opts.who, where(), what,
                      n, opts.max_frame);
    }
    std::string body(n, '\0');
    step([&](auto h) { asio::async_read(*socket, asio::buffer(body), h); }, d, what, t0);
    auto resp = store::decode(body);
    if (static_cast<Status>(resp.head) == Status::kError) {
      fail<PeerError>("{}: {} refused {}: {}", opts.who, where(), what,
                      resp.fields.empty() ? "" : resp.fields[0]);
    }
    return resp;
  }
};

Store::Store(StoreOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->opts = std::move(options);
  std::lock_guard lock(impl_->mu);
  impl_->connect(Deadline::after(impl_->opts.connect_timeout));
}
Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

Store Store::clone() const { return Store(impl_->opts); }
const StoreOptions& Store::options() const { return impl_->opts; }
Deadline Store::deadline() const { return Deadline::after(impl_->opts.timeout); }

void Store::set(std::string_view key, std::string_view value, Deadline d) {
  impl_->request(Op::kSet, {std::string(key), std::string(value)}, d,
                 fmt::format("set '{}'", key));
}

std::optional<std::string> Store::try_get(std::string_view key, Deadline d) {
  auto r = impl_->request(Op::kGet, {std::string(key)}, d, fmt::format("get '{}'", key));
  if (static_cast<Status>(r.head) == Status::kNotFound || r.fields.empty()) return std::nullopt;
  return r.fields[0];
}

std::string Store::get(std::string_view key, Deadline d) {
  while (true) {
    wait({std::string(key)}, d);
    if (auto v = try_get(key, d)) return *v;  // else deleted in between: wait again
  }
}

int64_t Store::add(std::string_view key, int64_t delta, Deadline d) {
  auto r = impl_->request(Op::kAdd, {std::string(key), std::to_string(delta)}, d,
                          fmt::format("add '{}'", key));
  int64_t v = 0;
  if (r.fields.empty()) fail<PeerError>("store: add '{}' returned no value", key);
  const std::string& f = r.fields[0];
  auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (ec != std::errc() || end != f.data() + f.size())
    fail<PeerError>("store: add '{}' returned '{}', not an integer", key, f.substr(0, 64));
  return v;
}

void Store::wait(const std::vector<std::string>& keys, Deadline d) {
  auto t0 = Clock::now();
  // The server times the wait out itself (and says which keys are missing);
  // our own deadline is a little later so its answer can still arrive.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(d.remaining());
  int64_t server_ms = d.is_never() ? int64_t{1} << 40 : left.count();
  std::vector<std::string> fields{std::to_string(server_ms)};
  fields.insert(fields.end(), keys.begin(), keys.end());
  Deadline client_d = d.is_never() ? d : Deadline(d.at() + std::chrono::seconds(2));
  auto r = impl_->request(Op::kWait, fields, client_d,
                          fmt::format("wait for {} key(s)", keys.size()));
  if (static_cast<Status>(r.head) == Status::kTimeout) {
    fail<TimeoutError>("{}: waited {} on {} for keys that never appeared: [{}]",
                       impl_->opts.who, format_duration(Clock::now() - t0), impl_->where(),
                       fmt::join(r.fields, ", "));
  }
}

std::string Store::compare_set(std::string_view key, std::string_view expected,
                               std::string_view desired, Deadline d) {
  auto r = impl_->request(Op::kCompareSet,
                          {std::string(key), std::string(expected), std::string(desired)}, d,
                          fmt::format("compare_set '{}'", key));
  return r.fields.empty() ? std::string() : r.fields[0];
}

bool Store::remove(std::string_view key, Deadline d) {
  auto r = impl_->request(Op::kDelete, {std::string(key)}, d, fmt::format("delete '{}'", key));
  return !r.fields.empty() && r.fields[0] == "1";
}

}  // namespace braid::comm
