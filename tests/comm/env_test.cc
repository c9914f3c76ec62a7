// read_env(): braid launch / torchrun, mpirun and Slurm variables, in order.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "braid/base/error.h"
#include "braid/comm/env.h"
#include "braid/comm/slurm.h"

namespace braid::comm {
namespace {

// Sets variables for one test and restores the previous values afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::vector<std::pair<std::string, std::string>> vars) {
    for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                          "MASTER_PORT", "BRAID_TOKEN", "BRAID_HOST", "BRAID_TCP_STREAMS", "BRAID_RESTART",
                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID",
                          "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE",
                          "SLURM_NODEID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
                          "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_STEPID"}) {
      const char* v = std::getenv(k);
      saved_.emplace_back(k, v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(k);
    }
    for (auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v) ::setenv(k.c_str(), v->c_str(), 1);
      else ::unsetenv(k.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(Env, NothingSetIsASingleProcess) {
  ScopedEnv e({});
  Env env = read_env();
  EXPECT_EQ(env.source, "single");
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.size, 1);
}

TEST(Env, LaunchVariablesWinOverMpiAndSlurm) {
  ScopedEnv e({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"},
               {"MASTER_PORT", "1234"}, {"BRAID_TOKEN", "t"}, {"BRAID_RESTART", "2"},
               {"OMPI_COMM_WORLD_RANK", "5"}, {"SLURM_PROCID", "6"}});
  Env env = read_env();
  EXPECT_EQ(env.source, "launch");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.master_port, 1234);
  EXPECT_EQ(store_options(env).who, "rank 3");
  EXPECT_EQ(transport_options(env).prefix, "braid/restart2");
}

TEST(Env, OpenMpiThenSlurm) {
  {
    ScopedEnv e({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURM_PROCID", "9"}});
    Env env = read_env();
    EXPECT_EQ(env.source, "mpirun");
    EXPECT_EQ(env.rank, 1);
    EXPECT_EQ(env.size, 4);
  }
  ScopedEnv e({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}, {"SLURM_LOCALID", "0"}});
  Env env = read_env();
  EXPECT_EQ(env.source, "slurm");
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.size, 3);
}

TEST(Env, SlurmStepDerivesTheRendezvous) {
  ScopedEnv e({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"},
               {"SLURM_STEP_NODELIST", "node07"}, {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}});
  Env env = read_env();
  EXPECT_EQ(env.source, "slurm");
  EXPECT_EQ(env.local_size, 2);  // one host in the step: every task is local
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, derived_port("77", "3"));
  EXPECT_EQ(env.token, derived_token("77", "3", ::getuid()));
  EXPECT_FALSE(env.token_given);
}

TEST(Env, SlurmSeveralHostsUseTheFirst) {
  ScopedEnv e({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "1"},
               {"SLURM_STEP_NODELIST", "gpu[3-4]"}, {"SLURM_STEP_TASKS_PER_NODE", "3,1"},
               {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"}});
  Env env = read_env();
  EXPECT_EQ(env.master_addr, "gpu3");
  EXPECT_EQ(env.local_size, 1);
}

TEST(Env, ExplicitSettingsWinUnderSlurm) {
  ScopedEnv e({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "n[1-2]"},
               {"SLURM_JOB_ID", "77"}, {"MASTER_ADDR", "10.1.1.1"}, {"MASTER_PORT", "4000"},
               {"BRAID_TOKEN", "s3cret"}});
  Env env = read_env();
  EXPECT_EQ(env.master_addr, "10.1.1.1");
  EXPECT_EQ(env.master_port, 4000);
  EXPECT_EQ(env.token, "s3cret");
  EXPECT_TRUE(env.token_given && env.master_addr_given && env.master_port_given);
}

TEST(Env, SlurmWithoutJobIdDerivesNoToken) {
  {
    ScopedEnv e({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "n1"}});
    Env env = read_env();
    EXPECT_TRUE(env.token.empty());  // join_job then asks for BRAID_TOKEN
    EXPECT_FALSE(env.token_given);
  }
  ScopedEnv e({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", "n1"}, {"BRAID_TOKEN", "t"}});
  EXPECT_EQ(read_env().token, "t");
}

TEST(Env, RankVariablesUnderMpirunMustAgree) {
  {
    ScopedEnv e({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
    EXPECT_EQ(read_env().source, "mpirun");  // nobody serves a store but rank 0: bootstrap over MPI
  }
  // A stale export: both mpirun ranks would claim rank 0.
  ScopedEnv e({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  try {
    read_env();
    FAIL();
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("OMPI_COMM_WORLD_RANK=1"), std::string::npos) << err.what();
  }
}

TEST(Env, MalformedValuesNameTheVariable) {
  {
    ScopedEnv e({{"RANK", "two"}, {"WORLD_SIZE", "4"}});
    try {
      read_env();
      FAIL();
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find("RANK"), std::string::npos) << err.what();
    }
  }
  {
    ScopedEnv e({{"RANK", "4"}, {"WORLD_SIZE", "4"}});
    EXPECT_THROW(read_env(), ConfigError);
  }
  ScopedEnv e(std::vector<std::pair<std::string, std::string>>{{"MASTER_PORT", "70000"}});
  EXPECT_THROW(read_env(), ConfigError);
}

TEST(Env, TcpStreams) {
  {
    ScopedEnv e(std::vector<std::pair<std::string, std::string>>{{"BRAID_TCP_STREAMS", "4"}});
    EXPECT_EQ(transport_options(read_env()).tcp_streams, 4);
  }
  {
    ScopedEnv e({});
    EXPECT_EQ(transport_options(read_env()).tcp_streams, 1);
  }
  for (const char* bad : {"0", "17", "two"}) {
    ScopedEnv e(std::vector<std::pair<std::string, std::string>>{{"BRAID_TCP_STREAMS", bad}});
    try {
      read_env();
      FAIL() << bad;
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find("BRAID_TCP_STREAMS"), std::string::npos) << err.what();
    }
  }
}

}  // namespace
}  // namespace braid::comm
