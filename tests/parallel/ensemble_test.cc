// parallel::Ensemble: the members' average against hand-computed
// probabilities, members that disagree on N or C refused, gather's layout,
// bytes against the header's count, a dead member named by the others'
// watch, what a plan makes of members (who reports, who checkpoints, which
// data), and make_plan's refusals.
#include <gtest/gtest.h>

#include <thread>

#include "braid/comm/store/server.h"
#include "braid/comm/transport/inproc.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/parallel/ensemble.h"
#include "braid/parallel/plan_factory.h"
#include "tests/parallel/inproc_ranks.h"

namespace braid::parallel {
namespace {

using testing::on_ranks;

EnsembleOptions ring(EnsembleData data = EnsembleData::whole) {
  return {.data = data, .algorithm = comm::Algorithm::ring, .timeout = std::chrono::seconds(20)};
}

// Three members' probabilities for two examples of three classes. Member 0
// and 1 are each sure of a wrong class on example 0, member 2 of the right
// one; the mean (0.4, 0.3, 0.3) picks class 0. Worked by hand:
//   example 0: (0.1 + 0.1 + 1.0) / 3 = 0.4, (0.8 + 0.1 + 0.0) / 3 = 0.3, (0.1 + 0.8 + 0.0) / 3 = 0.3
//   example 1: (0.2 + 0.5 + 0.2) / 3 = 0.3, (0.2 + 0.25 + 0.2) / 3 = 0.65 / 3, (0.6 + 0.25 + 0.6) / 3 = 1.45 / 3
const std::vector<std::vector<float>> kProbs = {
    {0.1f, 0.8f, 0.1f, 0.2f, 0.2f, 0.6f},
    {0.1f, 0.1f, 0.8f, 0.5f, 0.25f, 0.25f},
    {1.0f, 0.0f, 0.0f, 0.2f, 0.2f, 0.6f},
};
const std::vector<double> kMean = {0.4, 0.3, 0.3, 0.3, 0.65 / 3, 1.45 / 3};

TEST(Ensemble, AverageIsTheMembersMeanProbability) {
  on_ranks(3, [](int r, comm::Communicator comm) {
    Ensemble e(comm, ring());
    Tensor probs = Tensor::from_vector<float>(kProbs[static_cast<size_t>(r)], {2, 3});
    e.average(probs);
    const std::vector<float> got = probs.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], kMean[i], 1e-7) << "member " << r << " entry " << i;
  });
}

TEST(Ensemble, AverageRefusesMembersThatDisagreeOnExamplesOrClasses) {
  for (const Shape& odd : {Shape{3, 3}, Shape{2, 4}}) {
    try {
      on_ranks(3, [&](int r, comm::Communicator comm) {
        Ensemble e(comm, ring());
        Tensor probs = Tensor::zeros(r == 2 ? odd : Shape{2, 3});
        e.average(probs);
      });
      ADD_FAILURE() << "no error for " << to_string(odd);
    } catch (const ConfigError& err) {
      EXPECT_NE(std::string(err.what()).find("members [2] predict"), std::string::npos) << err.what();
    }
  }
}

TEST(Ensemble, GatherIsMemberMajor) {
  on_ranks(4, [](int r, comm::Communicator comm) {
    Ensemble e(comm, ring());
    const std::vector<double> all = e.gather({static_cast<double>(r), 10.0 + r});
    ASSERT_EQ(all.size(), 8u);
    for (int m = 0; m < 4; ++m) {
      EXPECT_EQ(all[static_cast<size_t>(2 * m)], m);
      EXPECT_EQ(all[static_cast<size_t>(2 * m + 1)], 10.0 + m);
    }
  });
}

TEST(Ensemble, CountsBytesAsTheHeaderSaysAndOnlyAfterTraining) {
  on_ranks(3, [](int r, comm::Communicator comm) {
    Ensemble e(comm, ring());
    e.setup({}, {}, {});
    Tensor probs = Tensor::from_vector<float>(kProbs[static_cast<size_t>(r)], {2, 3});
    e.average(probs);  // while training (a misuse; counted as such)
    const double average = 2.0 * 2 / 3 * 6 * 4 + 2 * 16;
    EXPECT_DOUBLE_EQ(e.bytes_sent(), average);
    EXPECT_DOUBLE_EQ(e.bytes_sent_training(), average);
    e.finish();
    e.gather({1, 2, 3});
    EXPECT_DOUBLE_EQ(e.bytes_sent(), average + 2 * 3 * 8);
    EXPECT_DOUBLE_EQ(e.bytes_sent_training(), average);
    EXPECT_EQ(e.stats()["bytes_sent_training"].get<double>(), average);
  });
}

TEST(Ensemble, WatchNamesAMemberThatStopsBeatingAtTheOthersNextStep) {
  using namespace std::chrono_literals;
  comm::StoreServer server({.token = "t"});
  comm::Store store({.port = server.port(), .token = "t", .connect_timeout = 2000ms, .timeout = 2000ms});
  std::vector<std::string> errors(3);
  on_ranks(3, [&](int r, comm::Communicator comm) {
    EnsembleOptions o = ring();
    o.timeout = 300ms;  // max silence
    o.store = &store;
    auto e = std::make_unique<Ensemble>(comm, o);
    e->setup({}, {}, {});
    for (int step = 0; step < 5; ++step) e->after_step();  // all beating: no error
    if (r == 2) {
      e.reset();  // member 2 "dies": its heartbeat stops
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      while (std::chrono::steady_clock::now() - start < 5s) {
        e->after_step();
        std::this_thread::sleep_for(5ms);
      }
    } catch (const PeerError& err) {
      errors[static_cast<size_t>(r)] = err.what();
      // Noticed within the silence allowed plus a check interval (75 ms) and slack.
      EXPECT_LT(std::chrono::steady_clock::now() - start, 300ms + 75ms + 500ms);
    }
  });
  for (int r : {0, 1}) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("member [2] silent"), std::string::npos)
        << "member " << r << ": " << errors[static_cast<size_t>(r)];
  }
}

TEST(Ensemble, PlanMembersEachCheckpointAndMemberZeroReports) {
  for (EnsembleData data : {EnsembleData::whole, EnsembleData::shard}) {
    on_ranks(3, [&](int r, comm::Communicator comm) {
      PlanParts parts;
      parts.aggregation = std::make_unique<Ensemble>(comm, ring(data));
      Plan plan(std::move(parts));
      EXPECT_TRUE(plan.writes_checkpoints());
      EXPECT_EQ(plan.is_leader(), r == 0);
      EXPECT_EQ(plan.aggregation()->member(), r);
      // Members keep their own run ids: no broadcast from member 0.
      EXPECT_EQ(plan.agree_on_run_id(fmt::format("member{}", r)), fmt::format("member{}", r));
      if (data == EnsembleData::whole) {
        EXPECT_EQ(plan.data_rank(), 0);
        EXPECT_EQ(plan.data_world(), 1);
      } else {
        EXPECT_EQ(plan.data_rank(), r);
        EXPECT_EQ(plan.data_world(), 3);
      }
    });
  }
}

TEST(Ensemble, MakePlanBuildsMembersAndRefusesWhatWouldCommunicate) {
  on_ranks(2, [](int r, comm::Communicator comm) {
    Generator gen(1);
    auto model = std::make_shared<nn::Linear>(3, 2, gen);
    // Named options: GCC 12 misreads temporaries of PlanOptions as uninitialised.
    PlanOptions o;
    o.strategy = "ensemble";
    PlannedModel p = make_plan(o, comm, nullptr, model, nn::cross_entropy_loss);
    EXPECT_EQ(p.plan->aggregation()->name(), "ensemble");
    EXPECT_EQ(p.plan->aggregation()->member(), r);
    EXPECT_EQ(p.model, model);  // a whole model per member
    PlanOptions tensor = o, synced = o;
    tensor.mesh.tensor = 2;
    synced.sync_batch_norm = true;
    EXPECT_THROW(make_plan(tensor, comm, nullptr, model, nn::cross_entropy_loss), ConfigError);
    EXPECT_THROW(make_plan(synced, comm, nullptr, model, nn::cross_entropy_loss), ConfigError);
  });
  EXPECT_EQ(parse_ensemble_data("shard"), EnsembleData::shard);
  EXPECT_THROW(parse_ensemble_data("half"), ConfigError);
}

}  // namespace
}  // namespace braid::parallel
