// Communicator ids (comm/tags.h): every member of a communicator agrees on its
// id, and no rank holds two communicators with one id -- through nested
// splits, the hierarchical all-reduce's own splits, and splits of different
// communicators running at the same time.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "braid/comm/tags.h"
#include "tests/comm/collectives_util.h"

namespace braid::comm::testing {
namespace {

// What each rank saw: label -> (id, transport ranks of the members).
using Seen = std::map<std::string, std::pair<uint32_t, std::vector<int>>>;

void record(Seen& seen, const std::string& label, const Communicator& c) {
  if (!c.valid()) return;
  std::vector<int> members;
  for (int i = 0; i < c.size(); ++i) members.push_back(c.transport_rank(i));
  seen[label] = {c.id(), members};
}

// Per rank: distinct ids, none in the service range. Across ranks: the
// members of a communicator (same label, same members) agree on its id.
void check_ids(const std::vector<Seen>& seen) {
  for (size_t r = 0; r < seen.size(); ++r) {
    std::set<uint32_t> ids;
    for (const auto& [label, entry] : seen[r]) {
      EXPECT_TRUE(ids.insert(entry.first).second) << "rank " << r << " holds id " << entry.first << " twice";
      EXPECT_GE(entry.first, kRootCommunicatorId);
      EXPECT_LE(entry.first, kLastCommunicatorId);
    }
    for (const auto& [label, entry] : seen[r])
      for (int member : entry.second) {
        auto it = seen[member].find(label);
        ASSERT_NE(it, seen[member].end()) << label;
        EXPECT_EQ(it->second.first, entry.first) << "rank " << member << " disagrees on " << label << "'s id";
        EXPECT_EQ(it->second.second, entry.second);
      }
  }
}

TEST(CommIds, NestedSplitsOfA2x2x2GridAndHierarchicalGroupsAreDistinct) {
  std::vector<Seen> seen(8);
  run_world(8, [&](int r, Communicator& world) {
    record(seen[r], "world", world);
    // The three axes of a 2x2x2 grid (tensor fastest), then splits of splits.
    const int t = r % 2, d = (r / 2) % 2, p = r / 4;
    Communicator dp = world.split(p * 2 + t, d), tp = world.split(p * 2 + d, t), pp = world.split(d * 2 + t, p);
    record(seen[r], fmt::format("dp{}", p * 2 + t), dp);
    record(seen[r], fmt::format("tp{}", p * 2 + d), tp);
    record(seen[r], fmt::format("pp{}", d * 2 + t), pp);
    Communicator half = world.split(r < 4 ? 0 : -1, r);
    record(seen[r], "half", half);
    if (half.valid()) record(seen[r], fmt::format("quarter{}", half.rank() / 2), half.split(half.rank() / 2, 0));
    // Hierarchical all-reduces split inside the collective (hosts of 2 and 3
    // ranks), on the world and on the data-parallel group.
    std::vector<double> x{static_cast<double>(r)};
    world.allreduce(x, {.algorithm = Algorithm::hierarchical}).wait(Deadline::after(30s));
    EXPECT_EQ(x[0], 28.0);
    // A split after them must not reuse the ids they took (checked by the
    // collectives on it matching only their own messages).
    Communicator after = world.split(r % 3, r);
    record(seen[r], fmt::format("after{}", r % 3), after);
    std::vector<double> y{1.0};
    after.allreduce(y).wait(Deadline::after(30s));
    EXPECT_EQ(y[0], static_cast<double>(after.size()));
    EXPECT_GT(after.id(), half.valid() ? half.id() : 0u);
  }, [](int r) { return CommOptions{.host = fmt::format("host{}", r / 3)}; });
  check_ids(seen);
}

// Two threads per rank split two different communicators at once: both
// splits may see the same highest id, and the vote must keep them apart.
TEST(CommIds, ConcurrentSplitsOfTwoCommunicatorsGetDistinctIds) {
  for (int round = 0; round < 10; ++round) {
    std::vector<Seen> seen(4);
    run_world(4, [&](int r, Communicator& world) {
      Communicator a = world.split(0, r), b = world.split(0, r);
      record(seen[r], "a", a);
      record(seen[r], "b", b);
      Communicator a2, b2;
      std::thread other([&] { b2 = b.split(r % 2, r); });
      a2 = a.split(r / 2, r);
      other.join();
      record(seen[r], fmt::format("a2-{}", r / 2), a2);
      record(seen[r], fmt::format("b2-{}", r % 2), b2);
    });
    check_ids(seen);
  }
}

TEST(CommIds, TagsOfDifferentIdsNeverMeet) {
  for (uint32_t id : {kRootCommunicatorId, 2u, 12345u, kLastCommunicatorId}) {
    EXPECT_EQ(tag_id(collective_tag(id, 0)), id);
    EXPECT_EQ(tag_id(collective_tag(id, (1u << 24) - 1)), id);
    EXPECT_EQ(tag_id(p2p_tag(id, 0)), id);
    EXPECT_EQ(tag_id(p2p_tag(id, kMaxUserTag + 1)), id);
    EXPECT_EQ(p2p_tag(id, 0) & kP2PBit, kP2PBit);
    EXPECT_EQ(collective_tag(id, 7) & kP2PBit, 0u);
  }
  EXPECT_GT(kFirstServiceId, kLastCommunicatorId);
  EXPECT_GE(static_cast<uint32_t>(Service::parameter_server), kFirstServiceId);
  EXPECT_LE(static_cast<uint32_t>(Service::parameter_server), kIdMask);
  EXPECT_EQ(tag_id(service_tag(Service::parameter_server, 3)), static_cast<uint32_t>(Service::parameter_server));
}

}  // namespace
}  // namespace braid::comm::testing
