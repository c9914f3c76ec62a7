#include "braid/comm/arrivals.h"

#include <array>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "braid/base/json_number.h"

namespace braid::comm {

namespace {

// Bytes of every query, reply and notice: a Position's JSON with room for an
// error message (cut to fit).
constexpr size_t kMessageBytes = 4096;
using Message = std::array<char, kMessageBytes>;

nlohmann::json record_json(const OpRecord& r) {
  if (r.empty()) return nullptr;
  nlohmann::json j = to_json(r);
  if (r.error.size() > 600) j["error"] = r.error.substr(0, 600) + "...";
  return j;
}
OpRecord record_of(const nlohmann::json& j) { return j.is_null() ? OpRecord{} : op_record_from_json(j); }

std::shared_ptr<Message> encode(const nlohmann::json& j) {
  auto m = std::make_shared<Message>();
  m->fill(0);
  const std::string text = j.dump();
  if (text.size() >= kMessageBytes) return nullptr;  // cannot happen with errors cut to 600 bytes
  std::memcpy(m->data(), text.data(), text.size());
  return m;
}
std::optional<nlohmann::json> decode(const Message& m) {
  const size_t n = strnlen(m.data(), m.size());
  auto j = nlohmann::json::parse(m.data(), m.data() + n, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::span<std::byte> bytes(Message& m) { return {reinterpret_cast<std::byte*>(m.data()), m.size()}; }
std::span<const std::byte> cbytes(const Message& m) {
  return {reinterpret_cast<const std::byte*>(m.data()), m.size()};
}

}  // namespace

struct Arrivals::State {
  std::weak_ptr<Transport> transport;
  std::vector<int> members;
  int rank;
  std::shared_ptr<const History> history;
  Options o;
  std::atomic<bool> closed{false};
  std::atomic<bool> peer_failed{false};
  std::atomic<uint64_t> last_dumped_for{0};  // the sequence number the last on_query was for
  std::mutex mu;
  std::shared_ptr<const Notice> first_notice;             // guarded by mu
  std::vector<std::shared_ptr<const OpRecord>> notices;  // per peer, the last one; guarded by mu
};

namespace {

void listen_queries(const std::shared_ptr<Arrivals::State>& st, int peer) {
  auto transport = st->transport.lock();
  if (!transport || st->closed) return;
  auto query = std::make_shared<uint64_t>(0);
  transport->recv(st->members[peer], st->o.query_tag, {reinterpret_cast<std::byte*>(query.get()), sizeof(uint64_t)})
      .on_done([st, peer, query](std::exception_ptr err) {
        if (err || st->closed) return;
        auto t = st->transport.lock();
        if (!t) return;
        const Position p = st->history->position(*query);
        auto reply = encode({{"asked", record_json(p.asked)},
                             {"current", record_json(p.current)},
                             {"last_done", record_json(p.last_done)},
                             {"queued", p.queued}});
        if (reply) t->send(st->members[peer], st->o.reply_tag, cbytes(*reply)).on_done([reply](std::exception_ptr) {});
        // One dump per failed collective asked about is enough; a patient
        // asker repeats its question.
        if (st->o.on_query && st->last_dumped_for.exchange(*query) != *query) {
          try {
            st->o.on_query();
          } catch (const std::exception&) {
            // A dump that cannot be written must not stop the answers.
          }
        }
        listen_queries(st, peer);
      });
}

void listen_notices(const std::shared_ptr<Arrivals::State>& st, int peer) {
  auto transport = st->transport.lock();
  if (!transport || st->closed) return;
  auto msg = std::make_shared<Message>();
  transport->recv(st->members[peer], st->o.notice_tag, bytes(*msg)).on_done([st, peer, msg](std::exception_ptr err) {
    if (err || st->closed) return;
    if (auto j = decode(*msg)) {
      try {
        auto rec = std::make_shared<const OpRecord>(op_record_from_json(*j));
        std::lock_guard lock(st->mu);
        st->notices[peer] = rec;
        if (!st->first_notice) st->first_notice = std::make_shared<const Arrivals::Notice>(Arrivals::Notice{peer, *rec});
        st->peer_failed.store(true, std::memory_order_release);
      } catch (const Error&) {
        // A malformed notice is ignored: the waits still end by their deadlines.
      }
    }
    listen_notices(st, peer);
  });
}

}  // namespace

Arrivals::Arrivals(const std::shared_ptr<Transport>& transport, std::vector<int> members, int rank,
                   std::shared_ptr<const History> history, Options options)
    : state_(std::make_shared<State>()) {
  state_->transport = transport;
  state_->members = std::move(members);
  state_->rank = rank;
  state_->history = std::move(history);
  state_->o = std::move(options);
  state_->notices.resize(state_->members.size());
  for (int peer = 0; peer < static_cast<int>(state_->members.size()); ++peer) {
    if (peer == rank) continue;
    listen_queries(state_, peer);
    listen_notices(state_, peer);
  }
}

Arrivals::~Arrivals() { state_->closed = true; }

const std::atomic<bool>& Arrivals::peer_failed() const { return state_->peer_failed; }

std::shared_ptr<const Arrivals::Notice> Arrivals::peer_failure() const {
  std::lock_guard lock(state_->mu);
  return state_->first_notice;
}

void Arrivals::notify_failure(const OpRecord& failed) {
  auto transport = state_->transport.lock();
  if (!transport) return;
  auto msg = encode(record_json(failed));
  if (!msg) return;
  for (int peer = 0; peer < static_cast<int>(state_->members.size()); ++peer) {
    if (peer == state_->rank) continue;
    transport->send(state_->members[peer], state_->o.notice_tag, cbytes(*msg)).on_done([msg](std::exception_ptr) {});
  }
}

std::vector<std::optional<Position>> Arrivals::survey(uint64_t seq, Duration window) {
  const int p = static_cast<int>(state_->members.size());
  std::vector<std::optional<Position>> out(p);
  out[state_->rank] = state_->history->position(seq);
  auto transport = state_->transport.lock();
  if (!transport) return out;
  const Deadline until = Deadline::after(window);
  std::vector<std::shared_ptr<Message>> replies(p);
  std::vector<Work> waits(p);
  auto query = std::make_shared<uint64_t>(seq);
  for (int peer = 0; peer < p; ++peer) {
    if (peer == state_->rank) continue;
    replies[peer] = std::make_shared<Message>();
    auto buf = replies[peer];
    waits[peer] = transport->recv(state_->members[peer], state_->o.reply_tag, bytes(*buf));
    // The buffer must outlive a reply that arrives after we stop waiting.
    waits[peer].on_done([buf](std::exception_ptr) {});
    transport->send(state_->members[peer], state_->o.query_tag,
                    {reinterpret_cast<const std::byte*>(query.get()), sizeof(uint64_t)})
        .on_done([query](std::exception_ptr) {});
  }
  for (int peer = 0; peer < p; ++peer) {
    if (peer == state_->rank) continue;
    try {
      waits[peer].wait(until);
      if (auto j = decode(*replies[peer])) {
        Position pos;
        pos.asked = record_of(j->at("asked"));
        pos.current = record_of(j->at("current"));
        pos.last_done = record_of(j->at("last_done"));
        pos.queued = json_integer<uint64_t>(j->at("queued"));
        out[peer] = std::move(pos);
        continue;
      }
    } catch (const std::exception&) {
      // No (usable) answer: fall back on a notice, if the peer sent one.
    }
    std::lock_guard lock(state_->mu);
    if (const auto& n = state_->notices[peer]) {
      Position pos;
      if (n->seq == seq) pos.asked = *n;
      pos.current = *n;
      pos.queued = n->seq;
      pos.from_notice = true;
      out[peer] = std::move(pos);
    }
  }
  return out;
}

}  // namespace braid::comm
