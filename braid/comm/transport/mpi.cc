#include "braid/comm/transport/mpi.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "braid/base/error.h"
#include "braid/base/thread_name.h"
#include "braid/comm/mpi_session.h"

namespace braid::comm {

namespace {

constexpr size_t kMaxPiece = size_t{1} << 30;  // bytes per MPI message
// Closing: how long pending sends may go without one completing, and
// cancelled requests may take to finish, before their peer is given up on.
constexpr auto kStallGrace = std::chrono::milliseconds(500);

std::string mpi_error(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  return std::string(buf, len);
}

// Works whose MPI requests could not be cancelled when their transport went
// away; never released (see ~MpiTransport).
std::mutex g_unfinished_mu;
std::vector<Work> g_unfinished;

class MpiTransport final : public Transport {
 public:
  MpiTransport(std::shared_ptr<MpiSession> session, Deadline setup) : session_(std::move(session)) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    comm_ = session_->dup_world(setup, fmt::format("rank {} of {}: mpi transport set-up (duplicating "
                                                   "MPI_COMM_WORLD; every rank must create the mpi transport)",
                                                   rank_, size_));
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
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
      // Sends get a moment to reach their peers: up to 5 s while they keep
      // completing, 500 ms once none has for that long (a stopped or hung
      // peer takes nothing, and this runs while a failed rank's error unwinds,
      // before it is printed: a SIGSTOP under mpirun was reported 12 s after a
      // 5 s timeout). Receives are not waited for: the communicator's
      // listeners keep one posted per peer for the transport's whole life
      // (waiting for those cost every run 5 s).
      std::unique_lock l(mu_);
      const auto sends = [&] { return std::count_if(ops_.begin(), ops_.end(), [](const Op& op) { return op.is_send; }); };
      const auto by = Clock::now() + std::chrono::seconds(5);
      auto left = sends();
      auto moved = Clock::now();
      while (left > 0 && Clock::now() < by && Clock::now() - moved < kStallGrace) {
        cv_.wait_for(l, std::chrono::milliseconds(10));
        if (const auto n = sends(); n < left) left = n, moved = Clock::now();
      }
      stop_ = true;
    }
    cv_.notify_all();
    progress_.join();
    // A cancelled request is finished only once MPI says so: until then MPI
    // may still write into a receive's buffer, which completing the Work
    // would free (freeing the request right after MPI_Cancel did exactly
    // that). So complete the cancellations first, with a deadline.
    for (Op& op : ops_) MPI_Cancel(&op.req);
    const Deadline d = Deadline::after(kStallGrace);
    std::vector<Op> unfinished;
    for (Op& op : ops_) {
      int done = 0;
      while (MPI_Test(&op.req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && !d.expired())
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (!done) {
        unfinished.push_back(std::move(op));
        continue;
      }
      op.work.complete(std::make_exception_ptr(
          PeerError(fmt::format("rank {}: mpi transport closed with the operation pending", rank_))));
    }
    if (!unfinished.empty()) {
      // MPI still owns their buffers: keep them (and MPI) alive for good
      // rather than free memory MPI may write to, or hang in MPI_Finalize.
      session_->abandon();
      std::lock_guard l(g_unfinished_mu);
      for (Op& op : unfinished) g_unfinished.push_back(std::move(op.work));
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
    uint64_t tag;   // braid's
    int mtag;       // MPI's (mpi_tag)
  };

  // Braid tags have 64 bits (a communicator's id and sequence number sit
  // high); MPI's end at MPI_TAG_UB. Reducing modulo MPI_TAG_UB + 1, as this
  // transport first did, kept the lane and 15 bits of the sequence number:
  // every 32768th collective then shared its tag with the communicator's
  // always-posted arrivals listener (and user p2p tag 0 always did), MPI
  // matched the data into the listener's 8-byte receive, and the failed
  // collective left receives posted into buffers it then freed, which MPI
  // later wrote: the 'free(): invalid pointer' aborts of `braid bench
  // collective --transport mpi`. A 64-bit mix (splitmix64's finalizer)
  // spreads tags over the whole MPI range; post() refuses the rare receive
  // that would still share an MPI tag with a different pending one.
  int mpi_tag(uint64_t tag) const {
    tag ^= tag >> 30;
    tag *= 0xbf58476d1ce4e5b9ull;
    tag ^= tag >> 27;
    tag *= 0x94d049bb133111ebull;
    tag ^= tag >> 31;
    return static_cast<int>(tag % tag_modulus_);
  }

  void check_peer(int peer, const char* op) const {
    if (peer < 0 || peer >= size_ || peer == rank_)
      fail<ValueError>("rank {}: mpi {} to rank {} (world size {})", rank_, op, peer, size_);
  }

  void post(const Work& w, int peer, uint64_t tag, std::byte* data, size_t n, bool is_send) {
    const int mtag = mpi_tag(tag);
    size_t pieces = n == 0 ? 1 : (n + kMaxPiece - 1) / kMaxPiece;
    auto left = std::make_shared<std::atomic<int>>(static_cast<int>(pieces));
    std::lock_guard l(mu_);
    if (!is_send) {
      for (const Op& op : ops_) {
        if (op.is_send || op.peer != peer || op.mtag != mtag || op.tag == tag) continue;
        w.complete(std::make_exception_ptr(ValueError(fmt::format(
            "rank {}: mpi recv from rank {} with tag {} would share MPI tag {} with the pending receive of tag {}",
            rank_, peer, tag, mtag, op.tag))));
        return;
      }
    }
    for (size_t i = 0; i < pieces; ++i) {
      size_t off = i * kMaxPiece;
      int count = static_cast<int>(std::min(kMaxPiece, n - std::min(n, off)));
      Op op{MPI_REQUEST_NULL, w, left, peer, static_cast<size_t>(count), is_send, tag, mtag};
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

  std::shared_ptr<MpiSession> session_;  // first member: MPI outlives everything below
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  uint64_t tag_modulus_ = 32768;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Op> ops_;
  bool stop_ = false;
  std::thread progress_;
};

}  // namespace

std::unique_ptr<Transport> make_mpi_transport(std::chrono::milliseconds setup_timeout) {
  return std::make_unique<MpiTransport>(MpiSession::acquire(), Deadline::after(setup_timeout));
}

}  // namespace braid::comm
