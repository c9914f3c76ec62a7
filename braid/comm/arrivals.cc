#include "braid/comm/arrivals.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "braid/base/error.h"

namespace braid::comm {

namespace {
// What a rank answers: the last collective it started. Fixed size, bytes.
struct Record {
  uint64_t seq = 0;
  char op[24] = {};
};
}  // namespace

struct Arrivals::State {
  std::weak_ptr<Transport> transport;
  std::vector<int> members;
  int rank;
  uint64_t query_tag, reply_tag;
  std::atomic<bool> closed{false};
  std::mutex mu;
  Record last;  // guarded by mu
};

namespace {

void listen(const std::shared_ptr<Arrivals::State>& st, int peer) {
  auto transport = st->transport.lock();
  if (!transport || st->closed) return;
  auto query = std::make_shared<uint64_t>(0);
  Work w = transport->recv(st->members[peer], st->query_tag,
                           {reinterpret_cast<std::byte*>(query.get()), sizeof(uint64_t)});
  w.on_done([st, peer, query](std::exception_ptr err) {
    if (err || st->closed) return;
    auto t = st->transport.lock();
    if (!t) return;
    auto reply = std::make_shared<Record>();
    {
      std::lock_guard lock(st->mu);
      *reply = st->last;
    }
    t->send(st->members[peer], st->reply_tag, {reinterpret_cast<const std::byte*>(reply.get()), sizeof(Record)})
        .on_done([reply](std::exception_ptr) {});
    listen(st, peer);
  });
}

}  // namespace

Arrivals::Arrivals(const std::shared_ptr<Transport>& transport, std::vector<int> members, int rank,
                   uint64_t query_tag, uint64_t reply_tag)
    : state_(std::make_shared<State>()) {
  state_->transport = transport;
  state_->members = std::move(members);
  state_->rank = rank;
  state_->query_tag = query_tag;
  state_->reply_tag = reply_tag;
  for (int peer = 0; peer < static_cast<int>(state_->members.size()); ++peer)
    if (peer != rank) listen(state_, peer);
}

Arrivals::~Arrivals() { state_->closed = true; }

void Arrivals::started(uint64_t seq, std::string_view op) {
  std::lock_guard lock(state_->mu);
  state_->last.seq = seq;
  std::memset(state_->last.op, 0, sizeof(state_->last.op));
  std::memcpy(state_->last.op, op.data(), std::min(op.size(), sizeof(state_->last.op) - 1));
}

std::string Arrivals::who_never_arrived(uint64_t seq, Duration window) {
  auto transport = state_->transport.lock();
  if (!transport) return "transport gone";
  const int p = static_cast<int>(state_->members.size());
  const Deadline until = Deadline::after(window);
  std::vector<std::shared_ptr<Record>> replies(p);
  std::vector<Work> waits(p);
  auto query = std::make_shared<uint64_t>(seq);
  for (int peer = 0; peer < p; ++peer) {
    if (peer == state_->rank) continue;
    replies[peer] = std::make_shared<Record>();
    auto rec = replies[peer];
    waits[peer] = transport->recv(state_->members[peer], state_->reply_tag,
                                  {reinterpret_cast<std::byte*>(rec.get()), sizeof(Record)});
    // The buffer must outlive a reply that arrives after we stop waiting.
    waits[peer].on_done([rec](std::exception_ptr) {});
    transport->send(state_->members[peer], state_->query_tag,
                    {reinterpret_cast<const std::byte*>(query.get()), sizeof(uint64_t)})
        .on_done([query](std::exception_ptr) {});
  }
  std::vector<std::string> missing;
  for (int peer = 0; peer < p; ++peer) {
    if (peer == state_->rank) continue;
    bool answered = false;
    try {
      waits[peer].wait(until);
      answered = true;
    } catch (const Error&) {
    }
    if (!answered) {
      missing.push_back(fmt::format("{} (no answer within {})", peer, format_duration(window)));
    } else if (replies[peer]->seq < seq) {
      const Record& r = *replies[peer];
      missing.push_back(r.seq == 0 ? fmt::format("{} (started no collective yet)", peer)
                                   : fmt::format("{} (last started #{} {})", peer, r.seq, r.op));
    }
  }
  if (missing.empty()) return fmt::format("every rank arrived at #{}", seq);
  return fmt::format("ranks that never arrived at #{}: {}", seq, fmt::join(missing, ", "));
}

}  // namespace braid::comm
