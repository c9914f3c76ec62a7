// Link specs as people write them, and the one-line description of a cluster.
#include "braid/sim/cluster.h"

#include <gtest/gtest.h>

#include "braid/base/error.h"

namespace braid::sim {
namespace {

const comm::LinkCost kBase{.alpha = 7e-6, .beta = 1 / 3e9, .gamma = 1 / 5e9};

TEST(SimCluster, ParsesBandwidthAndLatency) {
  const comm::LinkCost l = parse_link("10Gbit/s,5us", kBase);
  EXPECT_DOUBLE_EQ(l.beta, 8 / 1e10);
  EXPECT_DOUBLE_EQ(l.alpha, 5e-6);
  EXPECT_DOUBLE_EQ(l.gamma, kBase.gamma);
}

TEST(SimCluster, WhatTheSpecLeavesOutKeepsTheBase) {
  const comm::LinkCost bw = parse_link("1.2GB/s", kBase);
  EXPECT_DOUBLE_EQ(bw.beta, 1 / 1.2e9);
  EXPECT_DOUBLE_EQ(bw.alpha, kBase.alpha);
  const comm::LinkCost lat = parse_link("30us", kBase);
  EXPECT_DOUBLE_EQ(lat.beta, kBase.beta);
  EXPECT_DOUBLE_EQ(lat.alpha, 30e-6);
}

TEST(SimCluster, EveryUnit) {
  EXPECT_DOUBLE_EQ(parse_link("800MiB/s,2ms", kBase).beta, 1 / (800.0 * 1024 * 1024));
  EXPECT_DOUBLE_EQ(parse_link("800MiB/s,2ms", kBase).alpha, 2e-3);
  EXPECT_DOUBLE_EQ(parse_link("100Gbit/s", kBase).beta, 8 / 1e11);
  EXPECT_DOUBLE_EQ(parse_link("8bit/s", kBase).beta, 1);
  EXPECT_DOUBLE_EQ(parse_link("8kbit/s", kBase).beta, 1e-3);
  EXPECT_DOUBLE_EQ(parse_link("8Mbit/s", kBase).beta, 1e-6);
  EXPECT_DOUBLE_EQ(parse_link("2B/s", kBase).beta, 0.5);
  EXPECT_DOUBLE_EQ(parse_link("2KB/s", kBase).beta, 0.5e-3);
  EXPECT_DOUBLE_EQ(parse_link("2MB/s", kBase).beta, 0.5e-6);
  EXPECT_DOUBLE_EQ(parse_link("1KiB/s", kBase).beta, 1 / 1024.0);
  EXPECT_DOUBLE_EQ(parse_link("1GiB/s", kBase).beta, 1 / 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_link("1 GB/s, 250 ns", kBase).alpha, 250e-9);
  EXPECT_DOUBLE_EQ(parse_link("5us,1GB/s", kBase).beta, 1e-9);
  EXPECT_DOUBLE_EQ(parse_link("2s", kBase).alpha, 2);
}

TEST(SimCluster, BadSpecsAreValueErrorsNamingTheSpec) {
  for (const char* spec : {"", "10", "10Gbps", "fast", "10Gbit/s,", "-1GB/s", "0GB/s", "1GB/s,2GB/s",
                           "5us,6us", "GB/s", "1e999GB/s"}) {
    try {
      parse_link(spec, kBase);
      ADD_FAILURE() << "accepted \"" << spec << "\"";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("\"") + spec + "\""), std::string::npos) << e.what();
    }
  }
}

TEST(SimCluster, Describe) {
  Cluster c;
  c.ranks = 4;
  c.ranks_per_host = 4;
  c.cores_per_host = 2;
  c.intra = {.alpha = 3e-6, .beta = 1 / 8e9};
  c.inter = {.alpha = 25e-6, .beta = 1 / 1.25e9};
  EXPECT_EQ(c.describe(), "4 ranks on 1 host of 2 cores; in-host 8.0 GB/s, 3 us; between hosts 1.25 GB/s, 25 us");
  c.ranks = 9;
  c.inter = {.alpha = 2e-3, .beta = 1 / 125e6};
  EXPECT_EQ(c.describe(),
            "9 ranks on 3 hosts (4 per host) of 2 cores; in-host 8.0 GB/s, 3 us; between hosts 125.0 MB/s, 2 ms");
}

}  // namespace
}  // namespace braid::sim
