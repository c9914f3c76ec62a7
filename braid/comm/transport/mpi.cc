#include "braid/comm/transport/mpi.h"

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "braid/base/error.h"
#include "braid/base/thread_name.h"

namespace braid::comm {

namespace {

constexpr size_t kMaxPiece = size_t{1} << 30;  // bytes per MPI message

std::string mpi_error(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, len);
}

class MpiTransport final : public Transport {
 public:
  MpiTransport() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    int* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    tag_modulus_ = flag && ub ? static_cast<uint64_t>(*ub) + 1 : 32768;
    progress_ = std::thread([this] {
      name_this_thread("mpi-progress");
      run();
    });
  }

  ~MpiTransport() override {
    {
      std::unique_lock l(mu_);
      // Give posted operations a moment to finish, then cancel the rest.
      cv_.wait_for(l, std::chrono::seconds(5), [&] { return ops_.empty(); });
      stop_ = true;
    }
    cv_.notify_all();
    progress_.join();
    for (auto& op : ops_) {
      MPI_Cancel(&op.req);
      MPI_Request_free(&op.req);
      op.work.complete(std::make_exception_ptr(
          PeerError(fmt::format("rank {}: mpi transport closed with the operation pending", rank_))));
    }
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }

  Work send(int peer, uint64_t tag, std::span<const std::byte> data) override {
    check_peer(peer, "send");
    Work w(fmt::format("rank {} mpi send to rank {} (tag {}, {} bytes)", rank_, peer, tag, data.size()));
    post(w, peer, tag, const_cast<std::byte*>(data.data()), data.size(), true);
    return w;
  }

  Work recv(int peer, uint64_t tag, std::span<std::byte> data) override {
    check_peer(peer, "recv");
    Work w(fmt::format("rank {} mpi recv from rank {} (tag {}, {} bytes)", rank_, peer, tag, data.size()));
    post(w, peer, tag, data.data(), data.size(), false);
    return w;
  }

 private:
  struct Op {
    MPI_Request req;
    Work work;
    std::shared_ptr<std::atomic<int>> pieces_left;
    int peer;
    size_t expect;  // bytes this piece must carry (recv)
    bool is_send;
  };

  void check_peer(int peer, const char* op) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      fail<ValueError>("rank {}: mpi {} to rank {} (world size {})", rank_, op, peer, size_);
  }

  void post(const Work& w, int peer, uint64_t tag, std::byte* data, size_t n, bool is_send) {
    int mtag = static_cast<int>(tag % tag_modulus_);
    size_t pieces = n == 0 ? 1 : (n + kMaxPiece - 1) / kMaxPiece;
    auto left = std::make_shared<std::atomic<int>>(static_cast<int>(pieces));
    std::lock_guard l(mu_);
    for (size_t i = 0; i < pieces; ++i) {
      size_t off = i * kMaxPiece;
      int count = static_cast<int>(std::min(kMaxPiece, n - std::min(n, off)));
      Op op{MPI_REQUEST_NULL, w, left, peer, static_cast<size_t>(count), is_send};
      // A longer message than posted completes with MPI_ERR_TRUNCATE, a shorter
      // one with a short count; both become a PeerError in run().
      int rc = is_send ? MPI_Isend(data + off, count, MPI_BYTE, peer, mtag, comm_, &op.req)
                       : MPI_Irecv(data + off, count, MPI_BYTE, peer, mtag, comm_, &op.req);
      if (rc != MPI_SUCCESS) {
        w.complete(std::make_exception_ptr(PeerError(
            fmt::format("rank {}: MPI_{} with rank {} failed: {}", rank_, is_send ? "Isend" : "Irecv",
                        peer, mpi_error(rc)))));
        return;
      }
      ops_.push_back(std::move(op));
    }
    cv_.notify_all();
  }

  void run() {
    std::vector<MPI_Request> reqs;
    std::vector<int> idx;
    std::vector<MPI_Status> st;
    while (true) {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || !ops_.empty(); });
      if (stop_) return;
      reqs.clear();
      for (auto& op : ops_) reqs.push_back(op.req);
      idx.resize(reqs.size());
      st.resize(reqs.size());
      int done = 0;
      int rc = MPI_Testsome(static_cast<int>(reqs.size()), reqs.data(), &done, idx.data(), st.data());
      if (done == MPI_UNDEFINED) done = 0;
      std::vector<std::pair<Work, std::exception_ptr>> finished;
      std::vector<bool> remove(ops_.size(), false);
      for (int k = 0; k < done; ++k) {
        Op& op = ops_[idx[k]];
        remove[idx[k]] = true;
        std::exception_ptr err;
        int code = rc == MPI_ERR_IN_STATUS ? st[k].MPI_ERROR : rc;
        if (code != MPI_SUCCESS) {
          err = std::make_exception_ptr(PeerError(fmt::format(
              "rank {}: mpi {} with rank {} failed: {}", rank_, op.is_send ? "send" : "recv",
              op.peer, mpi_error(code))));
        } else if (!op.is_send) {
          int got = 0;
          MPI_Get_count(&st[k], MPI_BYTE, &got);
          if (static_cast<size_t>(got) != op.expect)
            err = std::make_exception_ptr(PeerError(fmt::format(
                "rank {}: message from rank {} has {} bytes, the receive expects {}", rank_,
                op.peer, got, op.expect)));
        }
        if (err || op.pieces_left->fetch_sub(1) == 1) finished.emplace_back(op.work, err);
      }
      if (done > 0) {
        std::vector<Op> kept;
        for (size_t i = 0; i < ops_.size(); ++i)
          if (!remove[i]) kept.push_back(std::move(ops_[i]));
        ops_.swap(kept);
        cv_.notify_all();
      }
      l.unlock();
      for (auto& [w, e] : finished) w.complete(e);
      if (done == 0) std::this_thread::yield();
    }
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  uint64_t tag_modulus_ = 32768;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Op> ops_;
  bool stop_ = false;
  std::thread progress_;
};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

std::unique_ptr<Transport> make_mpi_transport() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) {
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    std::atexit(finalize_at_exit);
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    fail<ConfigError>("mpi transport needs MPI_THREAD_MULTIPLE; this MPI provides level {}", provided);
  }
  return std::make_unique<MpiTransport>();
}

}  // namespace braid::comm
