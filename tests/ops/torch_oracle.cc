#include "torch_oracle.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "braid/autograd/engine.h"
#include "braid/base/deadline.h"
#include "braid/base/error.h"

extern char** environ;

namespace braid::testing {

namespace {

using nlohmann::json;

constexpr auto kReplyTimeout = std::chrono::seconds(120);

// ---- base64 (RFC 4648, with padding) ----

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const uint8_t* p, size_t n) {
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = static_cast<uint32_t>(p[i]) << 16;
    if (i + 1 < n) v |= static_cast<uint32_t>(p[i + 1]) << 8;
    if (i + 2 < n) v |= p[i + 2];
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < n ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kB64[v & 63] : '=';
  }
  return out;
}

std::vector<uint8_t> base64_decode(const std::string& s) {
  int8_t rev[256];
  std::memset(rev, -1, sizeof rev);
  for (int i = 0; i < 64; ++i) rev[static_cast<uint8_t>(kB64[i])] = static_cast<int8_t>(i);
  std::vector<uint8_t> out;
  out.reserve(s.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const int8_t v = rev[static_cast<uint8_t>(c)];
    if (v < 0) fail<ValueError>("torch_oracle: bad base64 character {:?}", c);
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  return out;
}

// ---- tensors <-> JSON ----

DType dtype_from_name(const std::string& s) {
  for (DType t : kAllDTypes) {
    if (name(t) == s) return t;
  }
  fail<ValueError>("torch_oracle: unknown dtype {}", s);
}

json encode(const std::string& name_, const Tensor& t) {
  Tensor c = t.contiguous();
  return {{"name", name_},
          {"dtype", std::string(name(c.dtype()))},
          {"shape", c.shape()},
          {"data", base64_encode(static_cast<const uint8_t*>(c.raw_data()), c.nbytes())}};
}

Tensor decode(const json& j) {
  const Shape shape = j.at("shape").get<Shape>();
  Tensor t = Tensor::empty(shape, dtype_from_name(j.at("dtype").get<std::string>()));
  const std::vector<uint8_t> bytes = base64_decode(j.at("data").get<std::string>());
  if (bytes.size() != t.nbytes()) {
    fail<ValueError>("torch_oracle: {} bytes for a tensor of shape {} ({} bytes)", bytes.size(), to_string(shape),
                     t.nbytes());
  }
  if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

// ---- the child process ----

class Oracle {
 public:
  static Oracle& get() {
    static Oracle oracle;
    return oracle;
  }

  const std::string& unavailable() const { return unavailable_; }

  json request(const json& req) {
    if (!unavailable_.empty()) fail<ValueError>("torch_oracle: PyTorch unavailable: {}", unavailable_);
    send_line(req.dump());
    return json::parse(read_line("a reply"));
  }

  ~Oracle() {
    if (fd_ >= 0) ::close(fd_);  // EOF on the child's stdin: it exits
    if (pid_ > 0) {
      for (int i = 0; i < 100; ++i) {
        if (::waitpid(pid_, nullptr, WNOHANG) != 0) return;
        ::usleep(10000);
      }
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

 private:
  Oracle() {
    const char* py_env = std::getenv("BRAID_TORCH_PYTHON");
    const char* script_env = std::getenv("BRAID_TORCH_ORACLE");
    const std::string python = py_env ? py_env : "/usr/bin/python3";
    const std::string script =
        script_env ? script_env : (std::filesystem::path(BRAID_TESTS_DIR) / "ops/torch_oracle.py").string();
    if (::access(python.c_str(), X_OK) != 0) {
      unavailable_ = python + " is not executable";
      return;
    }
    if (!std::filesystem::exists(script)) {
      unavailable_ = script + " not found";
      return;
    }
    // A socket pair rather than pipes: send(MSG_NOSIGNAL) turns a dead child
    // into an error instead of a SIGPIPE that would kill the test binary.
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      unavailable_ = std::string("socketpair: ") + std::strerror(errno);
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 0);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 1);
    std::vector<std::string> args = {python, "-u", script};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, python.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(sv[1]);
    fd_ = sv[0];
    if (rc != 0) {
      unavailable_ = "posix_spawn " + python + ": " + std::strerror(rc);
      pid_ = -1;
      return;
    }
    try {
      const json hello = json::parse(read_line("the hello line (import torch)"));
      if (!hello.value("ok", false)) unavailable_ = hello.value("error", std::string("import failed"));
    } catch (const Error& e) {
      unavailable_ = e.what();
    }
  }

  void send_line(const std::string& s) {
    std::string line = s + "\n";
    size_t sent = 0;
    while (sent < line.size()) {
      const ssize_t n = ::send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail<PeerError>("torch_oracle: writing to the python child (pid {}): {}", pid_, std::strerror(errno));
      }
      sent += static_cast<size_t>(n);
    }
  }

  std::string read_line(const char* what) {
    const Deadline deadline = Deadline::after(kReplyTimeout);
    for (;;) {
      if (const size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline.remaining()).count();
      if (left <= 0) {
        fail<TimeoutError>("torch_oracle: python child (pid {}) sent no {} within {}", pid_, what,
                           format_duration(kReplyTimeout));
      }
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno != EINTR) fail<PeerError>("torch_oracle: poll: {}", std::strerror(errno));
      if (r <= 0) continue;
      char chunk[65536];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n == 0) fail<PeerError>("torch_oracle: python child (pid {}) exited while waiting for {}", pid_, what);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail<PeerError>("torch_oracle: read: {}", std::strerror(errno));
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  std::string unavailable_;
};

}  // namespace

std::string torch_unavailable_reason() { return Oracle::get().unavailable(); }

std::vector<TorchResult> torch_eval_batch(const std::vector<TorchCase>& cases) {
  json req;
  req["cases"] = json::array();
  for (const TorchCase& c : cases) {
    json jc;
    jc["expr"] = c.expr;
    jc["inputs"] = json::array();
    for (const auto& [n, t] : c.inputs) jc["inputs"].push_back(encode(n, t));
    jc["grad"] = c.options.grad;
    jc["grad_output"] = c.options.grad_output.defined() ? encode("R", c.options.grad_output) : json(nullptr);
    req["cases"].push_back(std::move(jc));
  }
  const json reply = Oracle::get().request(req);
  std::vector<TorchResult> results;
  for (const json& r : reply.at("results")) {
    if (!r.at("ok").get<bool>()) fail<ValueError>("torch_oracle: {}", r.at("error").get<std::string>());
    TorchResult res;
    for (const json& o : r.at("outputs")) res.outputs.push_back(decode(o));
    for (const auto& [n, g] : r.at("grads").items()) res.grads[n] = decode(g);
    results.push_back(std::move(res));
  }
  return results;
}

TorchResult torch_eval(const std::string& expr, std::vector<std::pair<std::string, Tensor>> inputs,
                       TorchEvalOptions options) {
  return torch_eval_batch({TorchCase{expr, std::move(inputs), std::move(options)}}).at(0);
}

void expect_matches_torch(const std::vector<OpCheck>& checks, uint64_t seed) {
  Generator gen(seed, 99);
  struct Ours {
    Tensor out;
    std::vector<Tensor> grads;
  };
  std::vector<Ours> ours;
  std::vector<TorchCase> cases;
  for (const OpCheck& c : checks) {
    std::vector<Tensor> in;
    for (const auto& [n, t] : c.inputs) {
      const bool wants = std::find(c.grad.begin(), c.grad.end(), n) != c.grad.end();
      // A fresh leaf handle on the same (possibly strided) storage.
      Tensor leaf = t.detach();
      if (wants) leaf.set_requires_grad();
      in.push_back(leaf);
    }
    Ours o;
    o.out = c.fn(in);
    TorchCase tc{c.expr, c.inputs, {c.grad, Tensor()}};
    if (!c.grad.empty()) {
      Tensor r = random_tensor(o.out.shape(), o.out.dtype(), gen);
      tc.options.grad_output = r;
      if (o.out.requires_grad()) autograd::backward(o.out, r);
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        if (in[i].requires_grad()) o.grads.push_back(in[i].grad());
      }
    }
    ours.push_back(std::move(o));
    cases.push_back(std::move(tc));
  }
  const std::vector<TorchResult> ref = torch_eval_batch(cases);
  for (size_t k = 0; k < checks.size(); ++k) {
    const OpCheck& c = checks[k];
    std::string shapes;
    for (const auto& [n, t] : c.inputs) shapes += fmt::format(" {}={}{}", n, to_string(t.shape()),
                                                              t.is_contiguous() ? "" : "(strided)");
    EXPECT_TRUE(all_close(ours[k].out, ref[k].value(), c.rtol, c.atol)) << "value of " << c.expr << " with" << shapes;
    size_t gi = 0;
    for (const auto& [n, t] : c.inputs) {
      if (std::find(c.grad.begin(), c.grad.end(), n) == c.grad.end()) continue;
      const Tensor ours_g = gi < ours[k].grads.size() ? ours[k].grads[gi] : Tensor();
      ++gi;
      const Tensor g = ours_g.defined() ? ours_g : Tensor::zeros(t.shape(), t.dtype());
      EXPECT_TRUE(all_close(g, ref[k].grads.at(n), c.rtol, c.atol))
          << "gradient wrt " << n << " of " << c.expr << " with" << shapes;
    }
  }
}

Tensor random_tensor(const Shape& shape, DType dtype, Generator& gen, double lo, double hi) {
  Tensor f = Tensor::empty(shape, DType::f64);
  double* p = f.data<double>();
  for (int64_t i = 0; i < f.numel(); ++i) {
    const double u = lo + (hi - lo) * gen.uniform_f64();
    p[i] = is_floating(dtype) ? u : std::floor(u);
  }
  return f.to(dtype);
}

Tensor random_index(const Shape& shape, int64_t n, Generator& gen) {
  Tensor t = Tensor::empty(shape, DType::i64);
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<int64_t>(gen.below(static_cast<uint64_t>(n)));
  return t;
}

Tensor strided_copy(const Tensor& t) {
  if (t.ndim() == 0) return t.clone();
  // Storage laid out as [..., last, 2*second_last] (transposed, doubled); the
  // view reads every other element of it.
  Shape shape = t.shape();
  const int64_t nd = t.ndim();
  Shape storage_shape = shape;
  if (nd >= 2) std::swap(storage_shape[nd - 1], storage_shape[nd - 2]);
  storage_shape[nd - 1] *= 2;
  Tensor base = Tensor::zeros(storage_shape, t.dtype());
  Shape bs = base.strides();
  Shape strides = bs;
  strides[nd - 1] *= 2;  // step 2 along the stored innermost dim
  if (nd >= 2) std::swap(strides[nd - 1], strides[nd - 2]);
  Tensor view = base.as_strided(shape, strides, 0);
  view.copy_from(t);
  return view;
}

::testing::AssertionResult all_close(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined()) {
    return ::testing::AssertionFailure() << "undefined tensor: " << to_string(a) << " vs " << to_string(b);
  }
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure() << "shapes differ: " << to_string(a.shape()) << " vs " << to_string(b.shape());
  }
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  int64_t bad = 0;
  std::string first;
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    const bool both_nan = std::isnan(va[i]) && std::isnan(vb[i]);
    const double err = std::abs(va[i] - vb[i]);
    const bool ok = both_nan || va[i] == vb[i] || err <= atol + rtol * std::abs(vb[i]);
    if (!ok) {
      if (bad++ == 0) first = fmt::format("element {}: {} vs {}", i, va[i], vb[i]);
      if (!std::isnan(err)) worst = std::max(worst, err);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << va.size() << " elements differ (shape "
                                       << to_string(a.shape()) << "), first " << first << ", max abs error "
                                       << worst;
}

}  // namespace braid::testing
