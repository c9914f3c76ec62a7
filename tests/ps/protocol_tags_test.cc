// The parameter server's tags live in its service id range of the transport's
// tag space (comm/tags.h): no communicator, however many splits a job makes,
// can send or receive a message with one of them.
#include <gtest/gtest.h>

#include <set>

#include "braid/comm/communicator.h"
#include "braid/comm/tags.h"
#include "braid/comm/transport/inproc.h"
#include "braid/ps/protocol.h"
#include "tests/testing/first_error.h"

namespace braid::ps {
namespace {

constexpr uint64_t kTags[] = {kRequestTag, kRequestDataTag, kReplyTag, kReplyDataTag};

TEST(ProtocolTags, AreDistinctAndInTheParameterServersRange) {
  std::set<uint64_t> distinct(std::begin(kTags), std::end(kTags));
  EXPECT_EQ(distinct.size(), 4u);
  for (uint64_t tag : kTags) {
    EXPECT_EQ(comm::tag_id(tag), static_cast<uint32_t>(comm::Service::parameter_server));
    EXPECT_GT(comm::tag_id(tag), comm::kLastCommunicatorId);
  }
}

// Many nested splits on 4 ranks: every communicator's id (hence every tag it
// uses, collective or point-to-point) stays below the service range.
TEST(ProtocolTags, AreOutsideEveryCommunicatorsTags) {
  auto world = comm::InprocWorld::create(4);
  std::vector<std::set<uint32_t>> ids(4);
  test::run_threads_first_error(4, [&](int r) {
    comm::Communicator c(std::shared_ptr<comm::Transport>(world->transport(r)));
    ids[r].insert(c.id());
    for (int i = 0; i < 50; ++i) {
      comm::Communicator child = c.split(i % 2 == 0 ? r % 2 : 0, r);
      ids[r].insert(child.id());
      if (i % 10 == 0) c = child;  // descend now and then
    }
  });
  for (const auto& rank_ids : ids) {
    EXPECT_GE(rank_ids.size(), 50u);
    for (uint32_t id : rank_ids)
      for (uint64_t tag : kTags) {
        EXPECT_NE(comm::tag_id(comm::collective_tag(id, 1)), comm::tag_id(tag));
        EXPECT_NE(comm::tag_id(comm::p2p_tag(id, 1)), comm::tag_id(tag));
      }
  }
}

}  // namespace
}  // namespace braid::ps
