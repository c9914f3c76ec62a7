// split(), host discovery and the hierarchical all-reduce built on them.
#include <unistd.h>

#include <algorithm>
#include <array>

#include "braid/base/error.h"
#include "braid/base/hash.h"
#include "braid/comm/communicator_impl.h"

namespace braid::comm {

namespace {

std::string this_host() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) return "localhost";
  return buf.data();
}

template <class T>
void allgather_one(Group& g, std::vector<T>& all, size_t chunk_bytes) {
  const size_t p = all.size();
  ring_allgather(g, reinterpret_cast<std::byte*>(all.data()), Partition{p, p}, sizeof(T), chunk_bytes);
}

}  // namespace

uint32_t Communicator::Impl::highest_id() const {
  std::lock_guard lock(family->ids_mu);
  return *family->ids.rbegin();
}

// The child's id: 1 + the largest id any member of the parent has taken
// (`highest`, gathered with the colors), so no communicator that any member is
// in has it, and every rank computes the same value. (The children of
// different colors share it: they have no member in common.) Splits of other
// communicators of this family may run at the same time on this rank and
// reach the same value, so a member holds it in family->ids while the ranks
// vote, and a split that finds it taken somewhere tries again above it.
uint32_t Communicator::Impl::agree_on_child_id(Group& g, bool member, std::vector<uint32_t> highest) {
  const int p = g.size();
  for (;;) {
    const uint64_t id = 1 + static_cast<uint64_t>(*std::max_element(highest.begin(), highest.end()));
    if (id > kLastCommunicatorId)
      fail<ConfigError>("rank {}: split: communicator ids are exhausted ({} taken on some rank)", g.rank(),
                        kLastCommunicatorId);
    std::vector<uint32_t> held(p);
    if (member) {
      std::lock_guard lock(family->ids_mu);
      held[rank] = family->ids.insert(static_cast<uint32_t>(id)).second ? 1 : 0;
    } else {
      held[rank] = 1;  // in no child: nothing to hold
    }
    allgather_one(g, held, options.chunk_bytes);
    if (std::all_of(held.begin(), held.end(), [](uint32_t h) { return h == 1; })) return static_cast<uint32_t>(id);
    if (member && held[rank] == 1) {
      std::lock_guard lock(family->ids_mu);
      family->ids.erase(static_cast<uint32_t>(id));
    }
    highest[rank] = highest_id();
    allgather_one(g, highest, options.chunk_bytes);
  }
}

Communicator Communicator::Impl::split_now(Group& g, int color, int key) {
  const int p = g.size();
  std::vector<std::array<int64_t, 3>> all(p);  // (color, key, highest id taken) per rank
  all[rank] = {color, key, highest_id()};
  allgather_one(g, all, options.chunk_bytes);
  std::vector<uint32_t> highest(p);
  for (int r = 0; r < p; ++r) highest[r] = static_cast<uint32_t>(all[r][2]);
  const uint32_t child_id = agree_on_child_id(g, color >= 0, std::move(highest));
  if (color < 0) return {};
  std::vector<int> order;
  for (int r = 0; r < p; ++r)
    if (all[r][0] == color) order.push_back(r);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return all[a][1] < all[b][1]; });
  std::vector<int> child_members;
  int child_rank = -1;
  for (int r : order) {
    if (r == rank) child_rank = static_cast<int>(child_members.size());
    child_members.push_back(members[r]);
  }
  auto child = Impl::create(transport, options, std::move(child_members), child_rank, child_id, family);
  {
    std::lock_guard lock(cost_mu);
    child->cost = cost;
    child->inter_cost = inter_cost;
  }
  return Communicator(std::move(child));
}

Communicator Communicator::split(int color, int key) const {
  Impl& m = impl();
  auto result = std::make_shared<Communicator>();
  const Duration timeout = m.options.timeout;
  // Color and key differ between ranks by design, so they are not part of
  // the call every rank must agree on.
  Work w = m.submit({.op = "split", .bytes = 24 * static_cast<uint64_t>(size())}, timeout,
                    [&m, result, color, key](Group& g) { *result = m.split_now(g, color, key); });
  // The worker enforces the timeout; the extra second covers its diagnosis.
  w.wait(Deadline::after(timeout + std::chrono::seconds(3)));
  return *result;
}

Communicator Communicator::split_by_host() const {
  const Impl& m = impl();
  // As int64: the collectives' dtypes have no unsigned 64-bit type.
  std::vector<int64_t> mine{static_cast<int64_t>(fnv1a(m.options.host.empty() ? this_host() : m.options.host))};
  std::vector<int64_t> hashes(static_cast<size_t>(size()));
  Communicator self(*this);
  self.allgather(mine, hashes, {.timeout = m.options.timeout})
      .wait(Deadline::after(m.options.timeout + std::chrono::seconds(3)));
  // Color: the first rank on my host.
  const auto color = std::find(hashes.begin(), hashes.end(), mine[0]) - hashes.begin();
  return split(static_cast<int>(color), rank());
}

void Communicator::Impl::discover_hosts(Group& g) {
  const int p = g.size();
  std::vector<uint64_t> hashes(p);
  hashes[rank] = fnv1a(options.host.empty() ? this_host() : options.host);
  ring_allgather(g, reinterpret_cast<std::byte*>(hashes.data()),
                 Partition{static_cast<size_t>(p), static_cast<size_t>(p)}, sizeof(uint64_t), options.chunk_bytes);
  std::vector<uint64_t> distinct = hashes;
  std::sort(distinct.begin(), distinct.end());
  hosts = static_cast<int>(std::unique(distinct.begin(), distinct.end()) - distinct.begin());
  if (hosts == 1 || hosts == p) return;  // nothing to build: hierarchical would be flat
  // Color = first rank on my host; leaders = local rank 0 of each host.
  const int color = static_cast<int>(std::find(hashes.begin(), hashes.end(), hashes[rank]) - hashes.begin());
  local = split_now(g, color, rank);
  leaders = split_now(g, local.rank() == 0 ? 0 : -1, rank);
  local.impl_->hosts = 1;
  local.impl_->arena_by_default = true;
  if (leaders.valid()) leaders.impl_->hosts = leaders.size();  // one rank per host: never hierarchical again
}

// Reduce to each host's leader, all-reduce among leaders, broadcast inside
// each host. Cost: 2 ceil(log2 l) (alpha_intra + n beta_intra) + the leaders'
// all-reduce on inter-host links, l ranks per host.
void Communicator::Impl::hierarchical_allreduce(Group& g, const ReduceArgs& a) {
  if (hosts == 0) discover_hosts(g);
  if (!local.valid()) {  // one host, or one rank per host: flat is the same thing
    ring_allreduce(g, a);
    return;
  }
  const Op op = a.op == Op::avg ? Op::sum : a.op;  // the parent divides once
  const BufferRef buf(a.data, a.count, a.dtype);
  auto left = [&] { return std::max<Duration>(g.deadline().remaining(), Duration(1ms)); };
  auto wait = [&](const Work& w) { w.wait(Deadline::after(left() + std::chrono::seconds(3))); };
  wait(local.reduce(buf, {.root = 0, .op = op, .timeout = left()}));
  if (leaders.valid()) wait(leaders.allreduce(buf, {.op = op, .timeout = left()}));
  wait(local.broadcast(buf, {.root = 0, .timeout = left()}));
}

}  // namespace braid::comm
