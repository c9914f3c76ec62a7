#include "braid/comm/history.h"

#include <algorithm>

#include "braid/base/json_number.h"

namespace braid::comm {

std::string_view name(OpState s) {
  switch (s) {
    case OpState::queued: return "queued";
    case OpState::started: return "started";
    case OpState::done: return "done";
    case OpState::failed: return "failed";
  }
  return "?";
}

std::string human_bytes(uint64_t b) {
  if (b >= (1u << 20) && b % (1u << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} bytes", b);
}

namespace {

std::string call_args(const OpInfo& info) {
  std::string s;
  if (info.dtype) s += fmt::format(" {}", name(*info.dtype));
  if (info.reduce) s += fmt::format(" {}", name(*info.reduce));
  if (info.root >= 0) s += fmt::format(", root {}", info.root);
  return s;
}

OpState parse_state(std::string_view s) {
  for (OpState st : {OpState::queued, OpState::started, OpState::done, OpState::failed})
    if (name(st) == s) return st;
  fail<ValueError>("history: unknown op state '{}'", s);
}

}  // namespace

std::string describe_args(const OpInfo& info) {
  std::string s = call_args(info);
  if (info.algorithm) s += fmt::format(", {}", name(*info.algorithm));
  return s;
}

std::string OpRecord::name() const {
  return fmt::format("{} #{} ({}{})", op, seq, human_bytes(bytes), args);
}

nlohmann::json to_json(const OpRecord& r) {
  nlohmann::json j{{"seq", r.seq},          {"op", r.op},           {"bytes", r.bytes},
                   {"args", r.args},        {"algorithm", r.algorithm}, {"state", name(r.state)},
                   {"queued", r.queued},    {"started", r.started}, {"ended", r.ended}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

OpRecord op_record_from_json(const nlohmann::json& j) {
  try {
    OpRecord r;
    r.seq = json_integer<uint64_t>(j.at("seq"));
    r.op = j.at("op").get<std::string>();
    r.bytes = json_integer<uint64_t>(j.at("bytes"));
    r.args = j.value("args", "");
    r.algorithm = j.value("algorithm", "");
    r.state = parse_state(j.at("state").get<std::string>());
    r.queued = j.value("queued", 0.0);
    r.started = j.value("started", 0.0);
    r.ended = j.value("ended", 0.0);
    r.error = j.value("error", "");
    return r;
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("history: malformed op record: {}", e.what());
  }
}

History::History(size_t capacity) : ring_(std::max<size_t>(capacity, 1)) {
  using namespace std::chrono;
  const double unix_now = duration<double>(system_clock::now().time_since_epoch()).count();
  unix_offset_ = unix_now - duration<double>(Clock::now().time_since_epoch()).count();
}

const History::Entry* History::find(uint64_t seq) const {
  if (seq == 0) return nullptr;
  const Entry& e = ring_[seq % ring_.size()];
  return e.seq == seq ? &e : nullptr;
}

void History::queued(uint64_t seq, const OpInfo& info) {
  std::lock_guard lock(mu_);
  Entry& e = ring_[seq % ring_.size()];
  e.seq = seq;
  e.info = info;
  e.ran.reset();
  e.state = OpState::queued;
  e.queued = Clock::now();
  e.started = e.ended = {};
  e.error.clear();
  last_queued_ = std::max(last_queued_, seq);
}

void History::started(uint64_t seq) {
  std::lock_guard lock(mu_);
  last_started_ = std::max(last_started_, seq);
  if (Entry* e = find(seq)) {
    e->state = OpState::started;
    e->started = Clock::now();
  }
}

void History::ran_with(uint64_t seq, Algorithm a) {
  std::lock_guard lock(mu_);
  if (Entry* e = find(seq)) e->ran = a;
}

void History::done(uint64_t seq) {
  std::lock_guard lock(mu_);
  last_done_ = std::max(last_done_, seq);
  if (Entry* e = find(seq)) {
    e->state = OpState::done;
    e->ended = Clock::now();
  }
}

void History::failed(uint64_t seq, std::string error) {
  std::lock_guard lock(mu_);
  if (Entry* e = find(seq)) {
    e->state = OpState::failed;
    e->ended = Clock::now();
    e->error = std::move(error);
  }
}

OpRecord History::format(const Entry& e) const {
  auto to_unix = [&](Clock::time_point t) {
    return t == Clock::time_point{} ? 0.0
                                    : unix_offset_ + std::chrono::duration<double>(t.time_since_epoch()).count();
  };
  OpRecord r;
  r.seq = e.seq;
  r.op = e.info.op;
  r.bytes = e.info.bytes;
  r.args = call_args(e.info);
  if (e.ran) {
    r.algorithm = name(*e.ran);
  } else if (e.info.algorithm) {
    r.algorithm = name(*e.info.algorithm);
  }
  r.state = e.state;
  r.queued = to_unix(e.queued);
  r.started = to_unix(e.started);
  r.ended = to_unix(e.ended);
  r.error = e.error;
  return r;
}

Position History::position(uint64_t asked) const {
  std::lock_guard lock(mu_);
  Position p;
  p.queued = last_queued_;
  if (const Entry* e = find(asked)) p.asked = format(*e);
  if (const Entry* e = find(last_started_)) p.current = format(*e);
  if (const Entry* e = find(last_done_)) p.last_done = format(*e);
  return p;
}

std::vector<OpRecord> History::records() const {
  std::lock_guard lock(mu_);
  std::vector<OpRecord> out;
  for (const Entry& e : ring_)
    if (e.seq != 0) out.push_back(format(e));
  std::sort(out.begin(), out.end(), [](const OpRecord& a, const OpRecord& b) { return a.seq < b.seq; });
  return out;
}

}  // namespace braid::comm
