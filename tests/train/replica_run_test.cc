// parallel.fault_tolerance = replica: the plans it refuses, each with its reason
// (train/replica_run.h). Recovery itself is tested in tests/parallel
// (replica_group_test.cc, replica_recovery.sh).
#include "braid/train/replica_run.h"

#include <gtest/gtest.h>

#include "braid/train/run_options.h"
#include "braid/train/schema.h"

namespace braid::train {
namespace {

std::string refusal(const std::vector<std::string>& sets) {
  Config c(braid_schema());
  c.set("parallel.fault_tolerance=replica");
  for (const std::string& s : sets) c.set(s);
  try {
    check_replica_plan(c, plan_options(c, std::chrono::seconds(3), ""));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ReplicaRun, PlansItCannotServeAreRefusedWithTheReason) {
  EXPECT_EQ(refusal({"parallel.strategy=allreduce"}), "");
  EXPECT_EQ(refusal({}), "");  // auto: allreduce over the data axis
  EXPECT_NE(refusal({"parallel.strategy=zero"}).find("serves parallel.strategy = allreduce; zero is not built"),
            std::string::npos);
  EXPECT_NE(refusal({"parallel.strategy=local_sgd"}).find("local_sgd is not built"), std::string::npos);
  EXPECT_NE(refusal({"parallel.tensor=2"}).find("replica of several processes"), std::string::npos);
  EXPECT_NE(refusal({"parallel.pipeline=2"}).find("replica of several processes"), std::string::npos);
  EXPECT_NE(refusal({"parallel.codec=fp16"}).find("parallel.codec = fp16 is not built for it"), std::string::npos);
  EXPECT_NE(refusal({"model.norm=sync_batch"}).find("model.norm = sync_batch"), std::string::npos);
  EXPECT_NE(refusal({"train.checkpoint_format=sharded"}).find("train.checkpoint_format = sharded"), std::string::npos);
  EXPECT_NE(refusal({"parallel.transport=shm"}).find("parallel.transport = shm"), std::string::npos);
}

TEST(ReplicaRun, OutsideALauncherTheGroupCannotBeJoined) {
  for (const char* v : {"RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID"}) {
    ::unsetenv(v);
  }
  Config c(braid_schema());
  c.set("parallel.fault_tolerance=replica");
  try {
    join_replica_group(c, std::chrono::seconds(3));
    FAIL() << "joined";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("needs the job's store: start the replicas with braid launch"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace braid::train
