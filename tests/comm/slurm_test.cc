// Slurm's host lists and task counts, and the port and token a step derives.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "braid/base/error.h"
#include "braid/comm/slurm.h"

namespace braid::comm {
namespace {

using Hosts = std::vector<std::string>;

TEST(SlurmHostlist, PlainNamesAndRanges) {
  EXPECT_EQ(expand_hostlist("gpu3"), Hosts{"gpu3"});
  EXPECT_EQ(expand_hostlist("a,b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(expand_hostlist("node[01-04,07],gpu3"),
            (Hosts{"node01", "node02", "node03", "node04", "node07", "gpu3"}));
  // The lower bound's width sets the padding; wider numbers are not cut.
  EXPECT_EQ(expand_hostlist("n[8-11]"), (Hosts{"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand_hostlist("n[098-101]"), (Hosts{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(expand_hostlist("n[5]"), Hosts{"n5"});
}

TEST(SlurmHostlist, SuffixesAndSeveralBrackets) {
  EXPECT_EQ(expand_hostlist("rack[1-2]-n[1-2]"), (Hosts{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(expand_hostlist("c[1,3].ib"), (Hosts{"c1.ib", "c3.ib"}));
  EXPECT_EQ(expand_hostlist("x[1-2],y[3-4]z"), (Hosts{"x1", "x2", "y3z", "y4z"}));
}

TEST(SlurmHostlist, MalformedListsNameTheList) {
  for (const char* bad : {"", "n[1-2", "n1-2]", "n[2-1]", "n[a-b]", "n[1-]", "a,,b", "n[]"}) {
    try {
      expand_hostlist(bad);
      FAIL() << "accepted '" << bad << "'";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("host list"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(expand_hostlist("n[0-9999999]"), ConfigError);  // past 1M hosts
}

TEST(SlurmTasksPerNode, RepeatsExpand) {
  EXPECT_EQ(expand_tasks_per_node("4"), std::vector<int>{4});
  EXPECT_EQ(expand_tasks_per_node("2(x3),1"), (std::vector<int>{2, 2, 2, 1}));
  for (const char* bad : {"", "x", "2(x3", "2(3)", "2(x)", "-1"}) EXPECT_THROW(expand_tasks_per_node(bad), ConfigError) << bad;
}

TEST(SlurmDerived, PortAndTokenDependOnTheStep) {
  const int p = derived_port("4242", "0");
  EXPECT_GE(p, 20000);
  EXPECT_LT(p, 30000);
  EXPECT_EQ(derived_port("4242", "0"), p);
  // Over many steps the ports spread out (a constant would pass the range check).
  std::vector<int> ports;
  for (int step = 0; step < 50; ++step) ports.push_back(derived_port("4242", std::to_string(step)));
  std::sort(ports.begin(), ports.end());
  EXPECT_GT(std::unique(ports.begin(), ports.end()) - ports.begin(), 45);

  const std::string t = derived_token("4242", "0", 1000);
  EXPECT_EQ(t.size(), 64u);  // hex of HMAC-SHA256
  EXPECT_EQ(derived_token("4242", "0", 1000), t);
  EXPECT_NE(derived_token("4242", "1", 1000), t);
  EXPECT_NE(derived_token("4243", "0", 1000), t);
  EXPECT_NE(derived_token("4242", "0", 1001), t);
}

}  // namespace
}  // namespace braid::comm
