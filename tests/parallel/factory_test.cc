#include <gtest/gtest.h>

#include "braid/comm/transport/inproc.h"
#include "braid/parallel/factory.h"

namespace braid::parallel {
namespace {

TEST(Factory, BuildsStrategiesByName) {
  EXPECT_EQ(make_strategy({.name = "none"}, comm::Communicator())->name(), "none");
  comm::Communicator one(std::shared_ptr<comm::Transport>(comm::InprocWorld::create(1)->transport(0)));
  auto s = make_strategy({.name = "allreduce"}, one);
  EXPECT_EQ(s->name(), "allreduce");
  EXPECT_EQ(s->data_world(), 1);
}

TEST(Factory, UnknownNameListsKnownOnes) {
  try {
    make_strategy({.name = "allreduse"}, comm::Communicator());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("allreduce"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid::parallel
