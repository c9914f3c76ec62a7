#include "braid/parallel/fault_tolerance/replica_group.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <thread>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/transport/registry.h"

namespace braid::parallel::fault_tolerance {

namespace {

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::string list(const std::vector<int>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// Heartbeats often enough that a silence of max_silence means a lost
// replica, not a late beat: a quarter of it, 20 ms to 1 s (MemberWatch's rule).
std::chrono::milliseconds beat_interval(Duration max_silence) {
  const auto quarter = std::chrono::duration_cast<std::chrono::milliseconds>(max_silence / 4);
  return std::clamp(quarter, std::chrono::milliseconds(20), std::chrono::milliseconds(1000));
}

// p2p tags of the state transfer (below 2^39, outside any collective's).
constexpr uint64_t kStateSizeTag = 1, kStateTag = 2;

}  // namespace

std::string MembershipChange::describe() const {
  std::string s = fmt::format("membership epoch {} at step {}: members {}", epoch, step, list(members));
  if (!left.empty()) s += fmt::format(", left {}", list(left));
  if (!joined.empty()) s += fmt::format(", joined {}", list(joined));
  if (source >= 0) s += fmt::format(", state sent by replica {} to {}", source, list(received));
  s += fmt::format(" ({:.3f} s; {})", seconds, reason);
  return s;
}

ReplicaGroup::ReplicaGroup(const comm::Store& store, ReplicaGroupOptions options)
    : o_(std::move(options)), store_(store.clone()) {
  if (o_.slots < 1 || o_.slot < 0 || o_.slot >= o_.slots) {
    fail<ValueError>("ReplicaGroup: slot {} is not one of the job's {} replicas", o_.slot, o_.slots);
  }
  // A replacement beats once it is announced: before, its beats would make
  // the replica it replaces look alive to the survivors' agreement.
  if (o_.joining) return;
  beat_ = std::make_unique<comm::Heartbeat>(store_, o_.prefix, o_.slot, beat_interval(o_.max_silence));
  if (o_.slot == 0) store_.set(key("config"), o_.config_hash);
  for (int s = 0; s < o_.slots; ++s) members_.push_back(s);
  connect(key("e0"), o_.slot, o_.slots);
}

// A replica that goes stops beating first: closing its transports may wait
// about a second for peers to hang up, and meanwhile it would count as alive.
ReplicaGroup::~ReplicaGroup() { beat_.reset(); }

void ReplicaGroup::connect(const std::string& prefix, int rank, int size) {
  if (transport_) retired_.emplace_back(comm_, transport_);
  comm_ = comm::Communicator();
  transport_.reset();
  if (o_.make_transport) {
    transport_ = o_.make_transport(store_, prefix, rank, size);
  } else {
    const comm::TransportOptions to{
        .rank = rank, .size = size, .token = o_.token, .prefix = prefix, .host = o_.host,
        .connect_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(o_.timeout)};
    transport_ = comm::make_transport("tcp", &store_, to);
  }
  comm_ = comm::Communicator(transport_, comm::CommOptions{.timeout = o_.timeout});
}

void ReplicaGroup::finish() { store_.set(key("finished"), "1", Deadline::after(o_.timeout)); }

bool ReplicaGroup::join() {
  const std::string theirs = store_.get(key("config"), Deadline::after(o_.timeout));
  if (theirs != o_.config_hash) {
    fail<ConfigError>("replica {} cannot join: its configuration digest is {} and the job's members run {} "
                      "(start it with the job's config)", o_.slot, o_.config_hash, theirs);
  }
  store_.set(key(fmt::format("join/{}", o_.slot)), o_.config_hash, Deadline::after(o_.timeout));
  const auto t0 = Clock::now();
  // The members admit a replacement at their next step boundary; a step
  // and an agreement fit in the timeout.
  const Deadline admitted_by = Deadline::after(o_.timeout);
  int64_t e = 0;  // the epoch whose successor may admit us
  while (true) {
    if (store_.try_get(key("finished"), Deadline::after(o_.timeout))) {
      logging::warn("replica {}: the members finished training before admitting it; nothing to join", o_.slot);
      return false;
    }
    if (admitted_by.expired()) {
      fail<TimeoutError>("replica {} was not admitted within {} of registering (no member announced it: are the "
                         "members training?)", o_.slot, format_duration(o_.timeout));
    }
    if (const auto cur = store_.try_get(key("epoch"), Deadline::after(o_.timeout))) e = std::max<int64_t>(e, std::stoll(*cur));
    if (const auto j = store_.try_get(key(fmt::format("e{}/joiners", e)), Deadline::after(o_.timeout))) {
      if (contains(nlohmann::json::parse(*j).get<std::vector<int>>(), o_.slot)) {
        if (!beat_) beat_ = std::make_unique<comm::Heartbeat>(store_, o_.prefix, o_.slot, beat_interval(o_.max_silence));
        store_.set(key(fmt::format("e{}/in/{}", e, o_.slot)), "-1", Deadline::after(o_.timeout));
      }
    }
    if (const auto rec = store_.try_get(key(fmt::format("e{}/record", e + 1)), Deadline::after(o_.timeout))) {
      const nlohmann::json r = nlohmann::json::parse(*rec);
      const auto members = r["members"].get<std::vector<int>>();
      const auto positions = r["positions"].get<std::vector<int64_t>>();
      ++e;
      if (!contains(members, o_.slot)) continue;  // agreed without us (a failure came first): wait for the next
      const int index = static_cast<int>(std::find(members.begin(), members.end(), o_.slot) - members.begin());
      MembershipChange change{.epoch = e, .step = *std::max_element(positions.begin(), positions.end()),
                              .members = members, .joined = {o_.slot}, .reason = "admission"};
      try {
        epoch_ = e;
        members_ = members;
        connect(key(fmt::format("e{}", e)), index, static_cast<int>(members.size()));
        transfer_state(members, positions, change);
      } catch (const PeerError& err) {
        logging::warn("replica {}: admission at epoch {} failed ({}); waiting for the next", o_.slot, e, err.what());
        continue;
      } catch (const TimeoutError& err) {
        logging::warn("replica {}: admission at epoch {} failed ({}); waiting for the next", o_.slot, e, err.what());
        continue;
      }
      store_.remove(key(fmt::format("join/{}", o_.slot)), Deadline::after(o_.timeout));
      change.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      logging::warn("replica {} joined: {}", o_.slot, change.describe());
      changes_.push_back(std::move(change));
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool ReplicaGroup::announce_joiners() {
  std::vector<int> joiners;
  for (int s = 0; s < o_.slots; ++s) {
    if (contains(members_, s)) continue;
    const auto v = store_.try_get(key(fmt::format("join/{}", s)), Deadline::after(o_.timeout));
    // A joiner of another configuration refused itself; it is never admitted.
    if (v && *v == o_.config_hash) joiners.push_back(s);
  }
  if (joiners.empty()) return false;
  store_.set(key(fmt::format("e{}/joiners", epoch_)), nlohmann::json(joiners).dump());
  return true;
}

ReplicaGroup::Outcome ReplicaGroup::average(std::span<float> grad, int64_t position) {
  const size_t n = grad.size();
  scratch_.resize(n + 1);
  // The leader's news of a replacement rides on the average as one more
  // value, so every member learns it in the same step.
  float announce = leads() && announce_joiners() ? 1.0f : 0.0f;
  while (true) {
    std::copy(grad.begin(), grad.end(), scratch_.begin());
    scratch_[n] = announce;
    std::string reason;
    try {
      comm_.allreduce(comm::BufferRef(scratch_), {.op = comm::Op::sum, .timeout = o_.timeout})
          .wait(Deadline::after(comm::collective_backstop(o_.timeout)));
      break;
    } catch (const PeerError& e) {
      reason = e.what();
    } catch (const TimeoutError& e) {
      reason = e.what();
    }
    reconfigure(position, reason, /*admission=*/false);
    if (replaced_) return Outcome::replaced;
    announce = leads() && announce_joiners() ? 1.0f : 0.0f;
  }
  // The mean over the members that contributed: a lost replica's gradient
  // is not in the sum, and the survivors' weigh alike.
  const float k = static_cast<float>(members_.size());
  for (size_t i = 0; i < n; ++i) grad[i] = scratch_[i] / k;
  if (scratch_[n] > 0) admit_pending_ = true;
  return Outcome::averaged;
}

void ReplicaGroup::at_step_boundary(int64_t position) {
  if (!admit_pending_) return;
  admit_pending_ = false;
  reconfigure(position, "admission", /*admission=*/true);
}

void ReplicaGroup::reconfigure(int64_t position, const std::string& first_reason, bool admission) {
  const auto t0 = Clock::now();
  const std::vector<int> before = members_;
  std::string reason = first_reason;
  replaced_ = false;
  if (!admission) logging::warn("replica {}: epoch {} failed at step {}: {}", o_.slot, epoch_, position + 1, reason);
  while (true) {
    const int64_t e = epoch_;
    const Deadline d = Deadline::after(o_.timeout);
    store_.set(key(fmt::format("e{}/in/{}", e, o_.slot)), std::to_string(position), d);
    logging::debug("replica {}: checked in at epoch {} ({:.3f} s)", o_.slot, e, std::chrono::duration<double>(Clock::now() - t0).count());
    std::vector<int> candidates = members_;
    if (admission) {
      if (const auto j = store_.try_get(key(fmt::format("e{}/joiners", e)), d)) {
        for (int s : nlohmann::json::parse(*j).get<std::vector<int>>()) {
          if (!contains(candidates, s)) candidates.push_back(s);
        }
      }
    }
    // Every candidate checks in, or its heartbeat falls silent (lost), or
    // the timeout passes (a replica alive but stuck is left out).
    comm::HeartbeatMonitor monitor(o_.prefix, o_.slots, std::chrono::duration_cast<std::chrono::milliseconds>(o_.max_silence));
    std::map<int, int64_t> in;
    std::vector<int> dead;
    while (true) {
      const Deadline call = Deadline::after(o_.timeout);
      for (int c : candidates) {
        if (in.count(c)) continue;
        if (const auto v = store_.try_get(key(fmt::format("e{}/in/{}", e, c)), call)) in[c] = std::stoll(*v);
      }
      dead = monitor.dead_ranks(store_, call);
      const bool settled = std::all_of(candidates.begin(), candidates.end(),
                                       [&](int c) { return in.count(c) || contains(dead, c); });
      if (settled || d.expired()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    nlohmann::json proposal{{"members", nlohmann::json::array()}, {"positions", nlohmann::json::array()}};
    for (const auto& [slot, pos] : in) {  // std::map: by slot
      proposal["members"].push_back(slot);
      proposal["positions"].push_back(pos);
    }
    const std::string rec =
        store_.compare_set(key(fmt::format("e{}/record", e + 1)), "", proposal.dump(), Deadline::after(o_.timeout));
    const nlohmann::json r = nlohmann::json::parse(rec);
    const auto members = r["members"].get<std::vector<int>>();
    const auto positions = r["positions"].get<std::vector<int64_t>>();
    if (!contains(members, o_.slot)) {
      fail<PeerError>("replica {} was left out of membership epoch {} (members {}): the others agreed before it "
                      "checked in (stopped or too slow); start a replacement for it", o_.slot, e + 1, list(members));
    }
    epoch_ = e + 1;
    members_ = members;
    const int index = static_cast<int>(std::find(members.begin(), members.end(), o_.slot) - members.begin());
    MembershipChange change{.epoch = epoch_, .step = *std::max_element(positions.begin(), positions.end()),
                            .members = members, .reason = reason};
    for (int s : before) {
      if (!contains(members, s)) change.left.push_back(s);
    }
    for (int s : members) {
      if (!contains(before, s)) change.joined.push_back(s);
    }
    logging::debug("replica {}: agreed on epoch {} ({:.3f} s)", o_.slot, epoch_, std::chrono::duration<double>(Clock::now() - t0).count());
    try {
      connect(key(fmt::format("e{}", epoch_)), index, static_cast<int>(members.size()));
      logging::debug("replica {}: connected ({:.3f} s)", o_.slot, std::chrono::duration<double>(Clock::now() - t0).count());
      transfer_state(members, positions, change);
    } catch (const PeerError& err) {
      reason = err.what();
      logging::warn("replica {}: epoch {} failed as it began: {}", o_.slot, epoch_, reason);
      admission = false;
      continue;
    } catch (const TimeoutError& err) {
      reason = err.what();
      logging::warn("replica {}: epoch {} failed as it began: {}", o_.slot, epoch_, reason);
      admission = false;
      continue;
    }
    store_.set(key("epoch"), std::to_string(epoch_), Deadline::after(o_.timeout));
    change.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    logging::warn("replica {}: {}", o_.slot, change.describe());
    changes_.push_back(std::move(change));
    return;
  }
}

void ReplicaGroup::transfer_state(const std::vector<int>& members, const std::vector<int64_t>& positions,
                                  MembershipChange& change) {
  const int64_t newest = *std::max_element(positions.begin(), positions.end());
  const int source = static_cast<int>(std::find(positions.begin(), positions.end(), newest) - positions.begin());
  std::vector<int> behind;
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] < newest) behind.push_back(static_cast<int>(i));
  }
  if (behind.empty()) return;
  change.source = members[source];
  for (int i : behind) change.received.push_back(members[i]);
  const int me = comm_.rank();
  const Deadline d = Deadline::after(comm::collective_backstop(o_.timeout));
  if (me == source) {
    if (!save_) fail<ValueError>("ReplicaGroup: a replica behind needs the state, and none can be saved (set_state_io)");
    std::vector<std::byte> blob = save_();
    uint64_t size = blob.size();
    for (int peer : behind) {
      comm_.send(comm::BufferRef(&size, 1, DType::i64), peer, {.tag = kStateSizeTag}).wait(d);
      comm_.send(comm::BufferRef(blob.data(), blob.size(), DType::u8), peer, {.tag = kStateTag}).wait(d);
    }
  } else if (contains(behind, me)) {
    if (!load_) fail<ValueError>("ReplicaGroup: this replica is behind and cannot load a state (set_state_io)");
    uint64_t size = 0;
    comm_.recv(comm::BufferRef(&size, 1, DType::i64), source, {.tag = kStateSizeTag}).wait(d);
    std::vector<std::byte> blob(size);
    comm_.recv(comm::BufferRef(blob.data(), blob.size(), DType::u8), source, {.tag = kStateTag}).wait(d);
    load_(blob);
    replaced_ = true;
  }
}

std::vector<MembershipChange> ReplicaGroup::take_changes() {
  std::vector<MembershipChange> out;
  out.swap(changes_);
  return out;
}

}  // namespace braid::parallel::fault_tolerance
