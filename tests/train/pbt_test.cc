// Population-based training: the truncation rule, exploration inside the
// ranges, a population on a toy objective (exploit/explore must find a
// better learning rate than the median member of independent runs), and a
// member driving real Trainers (the copied weights are the source's).
#include "braid/train/pbt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "braid/data/loader.h"
#include "braid/data/sampler.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/optim/sgd.h"
#include "braid/train/pbt_member.h"
#include "tests/testing/error_message.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

Report report(int member, double score, double lr = 0.1) {
  return {.member = member, .round = 1, .examples = 100, .score = score, .hyper = {{"lr", lr}}, .checkpoint = ""};
}

const HyperSpace kLr{{"lr", {.lo = 1e-3, .hi = 1.0, .log = true}}};

TEST(Pbt, TheBottomShareCopiesFromTheTopShare) {
  std::vector<Report> others{report(0, 0.9, 0.5), report(1, 0.8), report(2, 0.7), report(3, 0.6),
                             report(4, 0.5), report(5, 0.4), report(6, 0.3)};
  Generator gen(1);
  const PbtOptions o{.space = kLr, .fraction = 0.25, .perturb = 1.2};
  // 8 members, fraction 0.25: the bottom 2 copy one of the top 2.
  for (int trial = 0; trial < 20; ++trial) {
    const Decision d = decide(report(7, 0.1), others, o, gen);
    ASSERT_TRUE(d.exploit);
    EXPECT_TRUE(d.source.member == 0 || d.source.member == 1) << d.source.member;
    const double ratio = d.hyper.at("lr") / d.source.hyper.at("lr");
    EXPECT_TRUE(std::abs(ratio - 1.2) < 1e-9 || std::abs(ratio - 1 / 1.2) < 1e-9) << ratio;
  }
  EXPECT_TRUE(decide(report(7, 0.35), others, o, gen).exploit);   // 7th of 8
  EXPECT_FALSE(decide(report(7, 0.45), others, o, gen).exploit);  // 6th of 8
  EXPECT_FALSE(decide(report(7, 0.95), others, o, gen).exploit);
  // A member's own older report does not count against it.
  EXPECT_FALSE(decide(report(1, 0.85), {report(0, 0.9), report(1, 0.0), report(2, 0.5), report(3, 0.4)}, o, gen)
                   .exploit);
}

TEST(Pbt, AloneOrWithoutExploitAMemberKeepsGoing) {
  Generator gen(1);
  EXPECT_FALSE(decide(report(0, 0.1), {}, {.space = kLr}, gen).exploit);
  EXPECT_FALSE(decide(report(0, 0.1), {report(0, 0.5)}, {.space = kLr}, gen).exploit);
  const Decision d = decide(report(1, 0.1), {report(0, 0.9)}, {.space = kLr, .exploit = false}, gen);
  EXPECT_FALSE(d.exploit);
  EXPECT_EQ(d.hyper, report(1, 0.1).hyper);
}

TEST(Pbt, ExploreStaysInsideTheRanges) {
  const HyperSpace space{{"lr", {.lo = 0.01, .hi = 0.1}},
                         {"momentum", {.lo = 0.5, .hi = 0.95, .log = false}},
                         {"batch_size", {.lo = 32, .hi = 256, .power_of_two = true}}};
  Generator gen(2);
  Hyper h{{"lr", 0.1}, {"momentum", 0.9}, {"batch_size", 32}, {"weight_decay", 0.5}};
  for (int i = 0; i < 200; ++i) {
    const Hyper next = perturb(h, space, 1.2, gen);
    EXPECT_GE(next.at("lr"), 0.01);
    EXPECT_LE(next.at("lr"), 0.1);
    EXPECT_LE(next.at("momentum"), 0.95);
    const double b = next.at("batch_size");
    EXPECT_TRUE(b == 32 || b == 64 || b == 128 || b == 256) << b;
    const double ratio = b / h.at("batch_size");  // one power of two, or none at a bound
    EXPECT_TRUE(ratio == 2 || ratio == 0.5 || (ratio == 1 && (b == 32 || b == 256))) << ratio;
    EXPECT_EQ(next.at("weight_decay"), 0.5);  // not searched: unchanged
    h = next;
  }
}

TEST(Pbt, StartingPointsCoverTheRangeLogUniformly) {
  Generator gen(3);
  std::vector<double> lrs;
  for (int i = 0; i < 2000; ++i) lrs.push_back(sample_hyper(kLr, {{"batch_size", 64}}, gen).at("lr"));
  std::sort(lrs.begin(), lrs.end());
  EXPECT_GE(lrs.front(), 1e-3);
  EXPECT_LE(lrs.back(), 1.0);
  // Log-uniform on [1e-3, 1]: the median is near the geometric mean 0.0316.
  EXPECT_NEAR(std::log10(lrs[1000]), -1.5, 0.1);
  EXPECT_EQ(sample_hyper(kLr, {{"batch_size", 64}}, gen).at("batch_size"), 64);
}

TEST(Pbt, RangesParseAndBadOnesNameTheKey) {
  EXPECT_FALSE(parse_range("", "pbt.lr"));
  const HyperRange r = *parse_range("0.001, 0.3", "pbt.lr");
  EXPECT_DOUBLE_EQ(r.lo, 0.001);
  EXPECT_DOUBLE_EQ(r.hi, 0.3);
  for (const char* bad : {"0.3", "a,b", "0,1", "0.5,0.1"}) {
    EXPECT_NE(test::message_of<ConfigError>([&] { parse_range(bad, "pbt.lr"); }).find("pbt.lr"), std::string::npos)
        << bad;
  }
}

// A toy population: each member tracks a drifting target c_t with gradient
// steps on (a/2)(x - c_t)^2; its learning rate is the hyper-parameter (best
// near 1/a, divergent above 2/a). The score of a round is minus its mean loss.
struct ToyMember {
  double x = 0, lr = 0, score = 0;
};

double toy_round(ToyMember& m, int64_t& t, double a) {
  double loss = 0;
  for (int s = 0; s < 10; ++s, ++t) {
    const double target = std::sin(0.3 * static_cast<double>(t));
    loss += 0.5 * a * (m.x - target) * (m.x - target);
    m.x -= m.lr * a * (m.x - target);
    if (!std::isfinite(m.x) || std::abs(m.x) > 1e6) m.x = 1e6;  // diverged: keeps the worst score
  }
  return -loss / 10;
}

std::vector<ToyMember> run_population(bool exploit, int rounds) {
  const double a = 4;  // best lr near 1/a = 0.25
  const HyperSpace space{{"lr", {.lo = 1e-3, .hi = 1.0}}};
  Generator gen(7);
  LocalBoard board;
  std::vector<ToyMember> members(8);
  std::vector<int64_t> clock(members.size(), 0);
  for (auto& m : members) m.lr = sample_hyper(space, {}, gen).at("lr");
  for (int r = 0; r < rounds; ++r) {
    // Members in a shuffled order each round: they do not move in lock step.
    std::vector<size_t> order(members.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(gen.uniform_f64() * i)]);
    for (size_t i : order) {
      ToyMember& m = members[i];
      m.score = toy_round(m, clock[i], a);
      const Report mine{.member = static_cast<int>(i), .round = r, .examples = clock[i], .score = m.score,
                        .hyper = {{"lr", m.lr}}, .checkpoint = std::to_string(m.x)};
      board.publish(mine);
      const Decision d = decide(mine, board.latest(), {.space = space, .exploit = exploit}, gen);
      if (d.exploit) {
        m.x = std::stod(d.source.checkpoint);  // the source's "weights"
        m.lr = d.hyper.at("lr");
      }
    }
  }
  return members;
}

double median_score(std::vector<ToyMember> ms) {
  std::sort(ms.begin(), ms.end(), [](const ToyMember& a, const ToyMember& b) { return a.score < b.score; });
  return 0.5 * (ms[3].score + ms[4].score);
}

TEST(Pbt, OnAToyObjectiveFindsABetterLearningRateThanTheMedianMember) {
  const std::vector<ToyMember> independent = run_population(false, 30);
  const std::vector<ToyMember> pbt = run_population(true, 30);
  const auto best = *std::max_element(pbt.begin(), pbt.end(),
                                      [](const ToyMember& a, const ToyMember& b) { return a.score < b.score; });
  EXPECT_GT(best.score, median_score(independent));
  // Most of the population ends near the best learning rate, 0.25.
  int near = 0;
  for (const ToyMember& m : pbt) near += std::abs(std::log(m.lr / 0.25)) < std::log(2.0);
  EXPECT_GE(near, 5);
  EXPECT_GT(median_score(pbt), median_score(independent));
}

// Two members driving real Trainers on a linear problem: member 1 (a useless
// learning rate) ranks last and takes member 0's weights and perturbed
// hyper-parameters; every round is a lineage line.
TEST(PbtMember, ABottomMemberTakesTheTopMembersWeightsAndHyperParameters) {
  class Points final : public data::Dataset {
   public:
    int64_t size() const override { return 64; }
    data::ExampleSpec spec() const override { return {{2}, DType::f32, {}, DType::i64}; }
    void read(int64_t i, std::byte* input, std::byte* target) const override {
      const float x[2] = {static_cast<float>(i % 8) - 3.5f, static_cast<float>(i / 8) - 3.5f};
      const int64_t y = x[0] > 0;
      std::memcpy(input, x, 8);
      std::memcpy(target, &y, 8);
    }
  };
  test::TempDir dir;
  auto points = std::make_shared<Points>();
  LocalBoard board;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<std::shared_ptr<PbtMember>> members;
  const HyperSpace space{{"lr", {.lo = 1e-6, .hi = 1.0}}};
  for (int m = 0; m < 2; ++m) {
    Generator init(5 + m);
    auto model = std::make_shared<nn::Linear>(2, 2, init);
    const double lr = m == 0 ? 0.5 : 1e-6;
    auto loader = [&](int64_t batch) {
      return std::make_shared<data::Loader>(points, std::make_shared<data::SequentialSampler>(64),
                                            data::LoaderOptions{.batch_size = batch, .workers = 0});
    };
    trainers.push_back(std::make_unique<Trainer>(
        model, std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = lr, .momentum = 0.9}), nullptr,
        nn::cross_entropy_loss, loader(16), nullptr,
        TrainerOptions{.epochs = 1, .out_dir = (dir.path() / fmt::format("member-{}", m)).string()}));
    MemberOptions mo;
    mo.member = m;
    mo.pbt.space = space;
    mo.pbt.fraction = 0.5;
    mo.interval = 64;
    mo.base_lr = lr;
    mo.lineage_path = (dir.path() / fmt::format("lineage-{}.jsonl", m)).string();
    mo.seed = 9;
    members.push_back(std::make_shared<PbtMember>(*trainers.back(), board, loader(64), mo, Hyper{{"lr", lr}}));
    trainers.back()->add_callback(members.back());
  }
  trainers[0]->fit();  // one epoch of 64 examples: one round, alone on the board
  ASSERT_EQ(members[0]->rounds().size(), 1u);
  EXPECT_FALSE(members[0]->rounds()[0].exploit);
  const nn::NamedTensors top = trainers[0]->model().state_dict();
  trainers[1]->fit();
  ASSERT_EQ(members[1]->rounds().size(), 1u);
  const Round& r = members[1]->rounds()[0];
  ASSERT_TRUE(r.exploit) << r.note;
  EXPECT_EQ(r.source, 0);
  EXPECT_LT(r.score, r.source_score);
  // The round happened after member 1's last step: its weights are member 0's.
  const nn::NamedTensors mine = trainers[1]->model().state_dict();
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(mine[i].second.to_vector<float>(), top[i].second.to_vector<float>()) << top[i].first;
  }
  const double lr = members[1]->hyper().at("lr");
  EXPECT_TRUE(std::abs(lr - 0.5 * 1.2) < 1e-12 || std::abs(lr - 0.5 / 1.2) < 1e-12) << lr;
  EXPECT_DOUBLE_EQ(trainers[1]->lr_factor(), lr / 1e-6);
  std::ifstream lineage(dir.path() / "lineage-1.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(lineage, line));
  const nlohmann::json j = nlohmann::json::parse(line);
  EXPECT_EQ(j["source"], 0);
  EXPECT_TRUE(j["exploit"].get<bool>());
}

}  // namespace
}  // namespace braid::train
