#include "braid/comm/transport/inproc.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "braid/base/copy_bytes.h"
#include "braid/base/error.h"

namespace braid::comm {

namespace {

struct Key {
  int src, dst;
  uint64_t tag;
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = k.tag * 0x9e3779b97f4a7c15ull;
    h ^= (static_cast<uint64_t>(k.src) << 32 | static_cast<uint32_t>(k.dst)) + 0x632be59bd9b4e019ull +
         (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

struct PendingSend {
  std::span<const std::byte> data;
  Work work;
};
struct PendingRecv {
  std::span<std::byte> data;
  Work work;
};

struct Channel {
  std::deque<PendingSend> sends;  // posted, not yet matched; FIFO
  std::deque<PendingRecv> recvs;
};

}  // namespace

struct InprocWorld::State {
  int size = 0;
  std::mutex mu;
  bool closed = false;
  std::string close_reason;
  std::unordered_map<Key, Channel, KeyHash> channels;
};

namespace {

// Copies a matched pair outside the world lock and completes both works.
void deliver(const PendingSend& s, const PendingRecv& r, int src, int dst, uint64_t tag) {
  if (s.data.size() != r.data.size()) {
    auto err = std::make_exception_ptr(PeerError(fmt::format(
        "inproc: rank {} sent {} bytes to rank {} (tag {:#x}) but the receive expects {} bytes",
        src, s.data.size(), dst, tag, r.data.size())));
    r.work.complete(err);
    s.work.complete(err);
    return;
  }
  if (!s.data.empty()) copy_bytes(r.data.data(), s.data.data(), s.data.size());
  r.work.complete();
  s.work.complete();
}

}  // namespace

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<InprocWorld> world, int rank) : world_(std::move(world)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return world_->state_->size; }
  std::string name() const override { return "inproc"; }

  Work send(int peer, uint64_t tag, std::span<const std::byte> data) override {
    check_peer(peer, "send");
    Work work([me = rank_, peer, tag, n = data.size()] {
      return fmt::format("inproc rank {} send {} bytes to rank {} (tag {:#x})", me, n, peer, tag);
    });
    PendingRecv match;
    {
      auto& st = *world_->state_;
      std::lock_guard lock(st.mu);
      if (st.closed) return closed_work(st);
      auto it = st.channels.try_emplace(Key{rank_, peer, tag}).first;
      Channel& ch = it->second;
      if (ch.recvs.empty()) {
        ch.sends.push_back({data, work});
        return work;
      }
      match = std::move(ch.recvs.front());
      ch.recvs.pop_front();
      // Tags carry sequence numbers: drop drained channels or the map only grows.
      if (ch.recvs.empty() && ch.sends.empty()) st.channels.erase(it);
    }
    deliver({data, work}, match, rank_, peer, tag);
    return work;
  }

  Work recv(int peer, uint64_t tag, std::span<std::byte> data) override {
    check_peer(peer, "recv");
    Work work([me = rank_, peer, tag, n = data.size()] {
      return fmt::format("inproc rank {} recv {} bytes from rank {} (tag {:#x})", me, n, peer, tag);
    });
    PendingSend match;
    {
      auto& st = *world_->state_;
      std::lock_guard lock(st.mu);
      if (st.closed) return closed_work(st);
      auto it = st.channels.try_emplace(Key{peer, rank_, tag}).first;
      Channel& ch = it->second;
      if (ch.sends.empty()) {
        ch.recvs.push_back({data, work});
        return work;
      }
      match = std::move(ch.sends.front());
      ch.sends.pop_front();
      if (ch.recvs.empty() && ch.sends.empty()) st.channels.erase(it);
    }
    deliver(match, {data, work}, peer, rank_, tag);
    return work;
  }

 private:
  void check_peer(int peer, const char* op) const {
    if (peer < 0 || peer >= size() || peer == rank_)
      fail<ValueError>("inproc rank {}: {} to invalid peer {} (world size {})", rank_, op, peer, size());
  }
  Work closed_work(const InprocWorld::State& st) const {
    return Work::completed(std::make_exception_ptr(
        PeerError(fmt::format("inproc rank {}: world shut down: {}", rank_, st.close_reason))));
  }

  std::shared_ptr<InprocWorld> world_;
  int rank_;
};

InprocWorld::InprocWorld(int size) : state_(std::make_unique<State>()) {
  if (size < 1) fail<ValueError>("inproc world size must be >= 1, got {}", size);
  state_->size = size;
}

InprocWorld::~InprocWorld() = default;

std::shared_ptr<InprocWorld> InprocWorld::create(int size) {
  return std::shared_ptr<InprocWorld>(new InprocWorld(size));
}

int InprocWorld::size() const { return state_->size; }

std::unique_ptr<Transport> InprocWorld::transport(int rank) {
  if (rank < 0 || rank >= size()) fail<IndexError>("inproc: rank {} outside world of {}", rank, size());
  return std::make_unique<InprocTransport>(shared_from_this(), rank);
}

std::vector<std::unique_ptr<Transport>> InprocWorld::transports() {
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < size(); ++r) out.push_back(transport(r));
  return out;
}

void InprocWorld::shutdown(const std::string& reason) {
  std::unordered_map<Key, Channel, KeyHash> pending;
  {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
    state_->close_reason = reason;
    pending.swap(state_->channels);
  }
  auto err = std::make_exception_ptr(PeerError("inproc: world shut down: " + reason));
  for (auto& [key, ch] : pending) {
    for (auto& s : ch.sends) s.work.complete(err);
    for (auto& r : ch.recvs) r.work.complete(err);
  }
}

}  // namespace braid::comm
