// Ensemble members as trainers on threads: they start from different
// weights and train over transports that fail on any message (so any
// communication during training would fail the run), then are scored alone
// and together against a gather-then-average reference; the teacher's soft
// targets in one all-reduce or many; SoftTargets and its loss; the member's
// and student's configurations; and one process through make_training_run,
// member then student, as `braid train` runs them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "braid/base/thread_pool.h"
#include "braid/comm/transport/faulty.h"
#include "braid/comm/transport/inproc.h"
#include "braid/data/sampler.h"
#include "braid/nn/activation.h"
#include "braid/nn/linear.h"
#include "braid/nn/sequential.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/softmax.h"
#include "braid/optim/sgd.h"
#include "braid/parallel/plan_factory.h"
#include "braid/train/checkpoint.h"
#include "braid/train/distill.h"
#include "braid/train/ensemble.h"
#include "braid/train/schema.h"
#include "braid/train/trainer_setup.h"
#include "tests/testing/first_error.h"
#include "tests/testing/temp_dir.h"
#include "tests/train/blobs.h"

namespace braid::train {
namespace {

using testing::Blobs;

constexpr int kMembers = 3;

// Three members over in-process transports wrapped in FaultyTransport,
// every link cut until open() is called.
struct Members {
  std::shared_ptr<comm::InprocWorld> world = comm::InprocWorld::create(kMembers);
  std::vector<comm::FaultyTransport*> links;
  std::vector<comm::Communicator> comms;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::shared_ptr<data::Loader> test[kMembers];
  test::TempDir dir;

  Members() {
    for (int r = 0; r < kMembers; ++r) {
      std::set<int> others;
      for (int p = 0; p < kMembers; ++p) {
        if (p != r) others.insert(p);
      }
      auto t = std::make_shared<comm::FaultyTransport>(world->transport(r), comm::FaultPlan{.cut = others});
      links.push_back(t.get());
      comms.emplace_back(t, comm::CommOptions{.timeout = std::chrono::seconds(20)});
      trainers.push_back(make(r));
    }
  }
  void open() {
    for (auto* l : links) l->set_plan({});
  }
  // body(member) on one thread per member, one intra-op thread each.
  template <class Fn>
  void run(Fn body) {
    test::run_threads_first_error(
        kMembers,
        [&](int r) {
          set_num_threads(1);
          body(r);
        },
        [&] { world->shutdown("a member failed"); });
  }

 private:
  std::unique_ptr<Trainer> make(int r) {
    Generator gen(100 + static_cast<uint64_t>(r));  // each member's own initial weights
    auto model = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 16, gen), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 3, gen)});
    auto train = std::make_shared<data::Loader>(
        std::make_shared<Blobs>(300, 1), std::make_shared<data::ShuffledSampler>(300, 5 + static_cast<uint64_t>(r)),
        data::LoaderOptions{.batch_size = 32, .workers = 0});
    // Few, noisy test examples in two batches, so members disagree somewhere.
    test[r] = std::make_shared<data::Loader>(std::make_shared<Blobs>(90, 2), std::make_shared<data::SequentialSampler>(90),
                                             data::LoaderOptions{.batch_size = 64, .workers = 0});
    auto opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = 0.02, .momentum = 0.5});
    auto t = std::make_unique<Trainer>(model, std::move(opt), nullptr, nn::cross_entropy_loss, train, test[r],
                                       TrainerOptions{.epochs = 1, .out_dir = fmt::format("{}/member-{}", dir.str(), r)});
    parallel::PlannedModel p =
        parallel::make_plan({.strategy = "ensemble",
                             .ensemble = {.algorithm = comm::Algorithm::ring, .timeout = std::chrono::seconds(20)}},
                            comms[static_cast<size_t>(r)], nullptr, model, nn::cross_entropy_loss);
    t->set_plan(std::move(p.plan));
    return t;
  }
};

std::vector<float> flat_weights(Trainer& t) {
  std::vector<float> out;
  for (const auto& [name, w] : t.model().state_dict()) {
    const auto v = w.to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::map<std::string, std::vector<float>> by_name(const nn::NamedTensors& state) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : state) out[name] = t.to_vector<float>();
  return out;
}

TEST(Ensemble, CutLinksFailAnyCollective) {
  // The harness below can catch communication: a collective over the cut links fails.
  Members m;
  EXPECT_THROW(m.run([&](int r) { ensemble_of(*m.trainers[static_cast<size_t>(r)]).gather({1.0}); }), PeerError);
}

TEST(Ensemble, MembersStartApartTrainAloneAndAverageLikeTheReference) {
  Members m;
  std::vector<std::vector<float>> initial;
  for (auto& t : m.trainers) initial.push_back(flat_weights(*t));
  for (int a = 0; a < kMembers; ++a) {
    for (int b = a + 1; b < kMembers; ++b) EXPECT_NE(initial[static_cast<size_t>(a)], initial[static_cast<size_t>(b)]);
  }
  // Training with every link cut: one message would throw PeerError here.
  m.run([&](int r) { m.trainers[static_cast<size_t>(r)]->fit(); });
  for (int r = 0; r < kMembers; ++r) {
    Trainer& t = *m.trainers[static_cast<size_t>(r)];
    EXPECT_EQ(t.step(), 10);
    EXPECT_EQ(ensemble_of(t).bytes_sent_training(), 0);
    // Every member checkpoints its own model, in its own folder.
    const auto saved = load_checkpoint(checkpoint_stem(fmt::format("{}/member-{}", m.dir.str(), r), 10));
    EXPECT_EQ(by_name(saved.model), by_name(t.model().state_dict())) << "member " << r;
  }

  m.open();
  std::vector<EnsembleFigures> figures(kMembers);
  std::vector<Tensor> probs(kMembers);
  Tensor targets;
  m.run([&](int r) {
    Trainer& t = *m.trainers[static_cast<size_t>(r)];
    figures[static_cast<size_t>(r)] = evaluate_ensemble(t, *m.test[r]);
    Tensor y;
    probs[static_cast<size_t>(r)] = softmax(t.predict(*m.test[r], &y), 1);
    if (r == 0) targets = y;
  });
  // Reference: gather every member's probabilities, average in double, score.
  const int64_t n = targets.numel(), c = 3;
  const std::vector<int64_t> y = targets.to_vector<int64_t>();
  std::vector<double> mean(static_cast<size_t>(n * c), 0.0);
  std::vector<double> own_top1(kMembers, 0.0);
  for (int r = 0; r < kMembers; ++r) {
    const std::vector<float> p = probs[static_cast<size_t>(r)].to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = 0;
      for (int64_t k = 0; k < c; ++k) {
        mean[static_cast<size_t>(i * c + k)] += p[static_cast<size_t>(i * c + k)] / kMembers;
        if (p[static_cast<size_t>(i * c + k)] > p[static_cast<size_t>(i * c + best)]) best = k;
      }
      own_top1[static_cast<size_t>(r)] += (best == y[static_cast<size_t>(i)]) / static_cast<double>(n);
    }
  }
  double top1 = 0, loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t k = 0; k < c; ++k) {
      if (mean[static_cast<size_t>(i * c + k)] > mean[static_cast<size_t>(i * c + best)]) best = k;
    }
    top1 += (best == y[static_cast<size_t>(i)]) / static_cast<double>(n);
    loss -= std::log(mean[static_cast<size_t>(i * c + y[static_cast<size_t>(i)])]) / static_cast<double>(n);
  }
  for (const EnsembleFigures& f : figures) {
    EXPECT_EQ(f.examples, 90);
    EXPECT_NEAR(f.top1, top1, 1e-12);
    EXPECT_NEAR(f.loss, loss, 1e-5);
    ASSERT_EQ(f.member_top1.size(), static_cast<size_t>(kMembers));
    for (int r = 0; r < kMembers; ++r) {
      EXPECT_NEAR(f.member_top1[static_cast<size_t>(r)], own_top1[static_cast<size_t>(r)], 1e-12) << "member " << r;
      EXPECT_NEAR(f.member_top1[static_cast<size_t>(r)], m.trainers[static_cast<size_t>(r)]->evaluate().top1, 1e-12);
    }
  }
  // Members trained apart end apart.
  EXPECT_NE(flat_weights(*m.trainers[0]), flat_weights(*m.trainers[1]));
}

TEST(Ensemble, TeacherTargetsInOneAllReduceOrPerBatchAreTheMembersMeanAtT) {
  Members m;
  m.open();
  auto data = std::make_shared<Blobs>(100, 3);
  const double t = 3;
  std::vector<TeacherTargets> once(kMembers), per_batch(kMembers);
  std::vector<Tensor> own(kMembers);
  m.run([&](int r) {
    Trainer& tr = *m.trainers[static_cast<size_t>(r)];
    once[static_cast<size_t>(r)] = teacher_soft_targets(tr, data, {.temperature = t, .batch_size = 32, .workers = 0});
    per_batch[static_cast<size_t>(r)] = teacher_soft_targets(
        tr, data, {.temperature = t, .batch_size = 32, .workers = 0, .rows_per_allreduce = 32});
    data::Loader all(data, std::make_shared<data::SequentialSampler>(100), {.batch_size = 100, .workers = 0});
    own[static_cast<size_t>(r)] = softmax(div(tr.predict(all), t), 1);
  });
  EXPECT_EQ(once[0].allreduces, 1);
  EXPECT_EQ(per_batch[0].allreduces, 4);  // ceil(100 / 32)
  std::vector<double> mean(300, 0.0);
  for (const Tensor& p : own) {
    const auto v = p.to_vector<float>();
    for (size_t i = 0; i < v.size(); ++i) mean[i] += v[i] / kMembers;
  }
  for (int r = 0; r < kMembers; ++r) {
    const auto a = once[static_cast<size_t>(r)].probs.to_vector<float>();
    const auto b = per_batch[static_cast<size_t>(r)].probs.to_vector<float>();
    ASSERT_EQ(a.size(), 300u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_NEAR(a[i], mean[i], 1e-6) << i;
      EXPECT_NEAR(b[i], mean[i], 1e-6) << i;
    }
  }
}

TEST(Ensemble, SoftTargetsCarryTheLabelAndTheTeacherRow) {
  auto base = std::make_shared<Blobs>(6, 4);
  std::vector<float> p;
  for (int i = 0; i < 6; ++i) p.insert(p.end(), {0.5f, 0.25f + 0.01f * i, 0.25f - 0.01f * i});
  SoftTargets soft(base, Tensor::from_vector<float>(p, {6, 3}));
  EXPECT_EQ(soft.spec().target_shape, (Shape{4}));
  EXPECT_EQ(soft.spec().target_dtype, DType::f32);
  const data::Example e = soft.get(4), plain = base->get(4);
  EXPECT_EQ(e.input.to_vector<float>(), plain.input.to_vector<float>());
  EXPECT_EQ(e.target.to_vector<float>(), (std::vector<float>{static_cast<float>(plain.target.item()), p[12], p[13], p[14]}));
  EXPECT_THROW(SoftTargets(base, Tensor::zeros({5, 3})), ValueError);

  // The student's loss on these rows is distillation_loss on their parts.
  Tensor logits = Tensor::from_vector<float>({1, 2, 3, -1, 0, 1}, {2, 3});
  Tensor rows = Tensor::from_vector<float>({2, 0.2f, 0.3f, 0.5f, 0, 0.6f, 0.3f, 0.1f}, {2, 4});
  const double a = soft_target_loss(2.0, 0.7)(logits, rows).item();
  const double b = nn::distillation_loss(logits, Tensor::from_vector<float>({0.2f, 0.3f, 0.5f, 0.6f, 0.3f, 0.1f}, {2, 3}),
                                         Tensor::from_vector<int64_t>({2, 0}, {2}), 2.0, 0.7)
                       .item();
  EXPECT_EQ(a, b);
}

TEST(Ensemble, MemberAndStudentConfigurations) {
  Config run(braid_schema());
  run.set("train.seed=7");
  run.set("train.out_dir=/tmp/x");
  run.set("train.batch_size=64");
  run.set("model.hidden=256");
  run.set("parallel.strategy=ensemble");
  run.set("distill.epochs=2");
  run.set("distill.hidden=32");
  const Config m2 = member_config(run, 2);
  EXPECT_EQ(m2.get_int("train.seed"), 9);
  EXPECT_EQ(m2.get_string("train.out_dir"), "/tmp/x/member-2");
  const Config s = student_config(run, 3);
  EXPECT_EQ(s.get_int("train.seed"), 10);  // no member's
  EXPECT_EQ(s.get_string("train.out_dir"), "/tmp/x/student");
  EXPECT_EQ(s.get_int("model.hidden"), 32);
  EXPECT_EQ(s.get_string("model.name"), run.get_string("model.name"));
  EXPECT_EQ(s.get_int("train.epochs"), 2);
  EXPECT_EQ(s.get_int("distill.epochs"), 0);  // its checkpoints' config trains a plain model
  EXPECT_EQ(s.get_string("parallel.strategy"), "auto");
  EXPECT_EQ(s.get_int("train.batch_size"), 21);  // 3 ranks x 21: the members' 64 as near as divides
}

TEST(Ensemble, OneProcessTrainsItsMemberThenAStudentFromTheConfig) {
  test::TempDir dir;
  Config c(braid_schema());
  for (const char* kv : {"model.name=mlp", "model.hidden=16", "train.max_steps=20", "train.batch_size=32",
                         "train.epochs=1", "train.progress=off", "train.threads=1", "parallel.strategy=ensemble",
                         "distill.epochs=1", "distill.hidden=8"}) {
    c.set(kv);
  }
  c.set("train.out_dir=" + dir.str());
  TrainingRun run = make_training_run(c);
  EXPECT_EQ(ensemble_of(*run.trainer).members(), 1);
  EXPECT_TRUE(run.leader);
  run.trainer->fit();
  EXPECT_TRUE(std::filesystem::exists(dir.str() + "/member-0/ckpt-00000020.json"));
  const EnsembleFigures f = evaluate_ensemble(*run.trainer, *run.test_loader);
  ASSERT_EQ(f.member_top1.size(), 1u);
  EXPECT_EQ(f.top1, f.member_top1[0]);  // an ensemble of one is its member
  EXPECT_EQ(f.examples, 10000);

  const TeacherTargets teacher = teacher_soft_targets(*run.trainer, run.train_data, {.temperature = 2, .workers = 0});
  ASSERT_EQ(teacher.probs.shape(), (Shape{60000, 10}));
  const std::vector<float> p = teacher.probs.to_vector<float>();
  for (int64_t i = 0; i < 60000; i += 7919) {
    double row = 0;
    for (int k = 0; k < 10; ++k) row += p[static_cast<size_t>(i * 10 + k)];
    EXPECT_NEAR(row, 1.0, 1e-5) << "row " << i;
  }
  const Config sc = student_config(c, 1);
  TrainingRun student = make_training_run(
      sc, {.group = std::move(run.group),
           .train_data = [&](std::shared_ptr<const data::Dataset> d) -> std::shared_ptr<const data::Dataset> {
             return std::make_shared<SoftTargets>(std::move(d), teacher.probs);
           },
           .loss = soft_target_loss(2, 0.5)});
  EXPECT_EQ(student.model->num_parameters(), 784 * 8 + 8 + 8 * 8 + 8 + 8 * 10 + 10);
  const TrainSummary s = student.trainer->fit();
  EXPECT_EQ(s.steps, 20);
  ASSERT_TRUE(s.has_eval);
  EXPECT_GT(s.last_eval.top1, 0.3);  // learning from the soft targets, evaluated against labels
  // A normal checkpoint whose configuration trains the student as a plain model.
  const nlohmann::json side = read_checkpoint_sidecar(checkpoint_stem(dir.str() + "/student", 20));
  EXPECT_EQ(side["config"]["distill"]["epochs"], 0);
  EXPECT_EQ(side["config"]["model"]["hidden"], 8);

  Config plain = c;
  plain.set("parallel.strategy=none");
  EXPECT_THROW(make_training_run(plain), ConfigError);  // distill.epochs without an ensemble
}

}  // namespace
}  // namespace braid::train
