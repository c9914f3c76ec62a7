// Sharded checkpoints across plans: every rank of a run under one plan (data
// parallel, ZeRO 1-3, tensor and pipeline axes) writes its own shard; the
// manifest's whole model equals the whole checkpoint that plan gathers today
// (bit for bit), and a run under another plan and world size loads from the
// shards exactly what resharding the whole checkpoint gives it. A ZeRO rank
// reads only its runs of the optimizer's buffers.
#include <gtest/gtest.h>

#include <filesystem>

#include "braid/optim/adam.h"
#include "braid/train/checkpoint.h"
#include "braid/train/checkpoint_async.h"
#include "braid/train/checkpoint_info.h"
#include "braid/train/checkpoint_reshard.h"
#include "braid/train/checkpoint_sharded.h"
#include "braid/train/checkpoint_shards.h"
#include "tests/parallel/model_parallel_util.h"
#include "tests/testing/temp_dir.h"

namespace braid::train {
namespace {

namespace fs = std::filesystem;
using parallel::MeshShape;
using parallel::PlanOptions;
using parallel::PlannedModel;

constexpr int64_t kStep = 7;
constexpr int64_t kRows = 12;  // divides by 1, 2, 3, 4

PlanOptions plan_of(const std::string& strategy, int stage, MeshShape mesh = {}) {
  return {.strategy = strategy, .mesh = mesh, .microbatches = mesh.pipeline > 1 ? 2 : 1,
          .zero = {.stage = stage, .bucket_bytes = 256, .timeout = std::chrono::seconds(20)}};
}

std::unique_ptr<optim::Optimizer> adam(const std::vector<Tensor>& params) {
  return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = 0.01});
}

void train_steps(PlannedModel& pm, optim::Optimizer& opt, int steps) {
  parallel::Plan& plan = *pm.plan;
  const int64_t per = kRows / plan.data_world(), first = per * plan.data_rank();
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad(false);
    auto [x, t] = parallel::testing::batch(true, s, kRows);
    plan.forward_backward(*pm.model, pm.loss, slice(x, 0, first, first + per), slice(t, 0, first, first + per));
    plan.finish_gradients();
    opt.step();
    plan.after_step();
  }
}

std::vector<std::string> names_of(const nn::NamedTensors& tensors) {
  std::vector<std::string> out;
  for (const auto& [n, t] : tensors) out.push_back(n);
  return out;
}

// This rank's part as Trainer::resume describes it.
RankPart part_of(parallel::Plan& plan, const nn::Module& model) {
  RankPart part{.shard = plan.shard_name(), .state = model.state_dict(), .param_order = names_of(model.named_parameters()),
                .specs = plan.shards(), .optimizer_runs = {}, .layout = plan.describe(), .data_rank = plan.data_rank()};
  const auto runs = plan.optimizer_parameter_runs();
  const auto names = plan.optimizer_parameter_names(model);
  for (size_t j = 0; j < runs.size(); ++j) part.optimizer_runs[names[j]].push_back(runs[j]);
  return part;
}

// Trains two steps under `options` on `world` ranks, then writes the sharded
// checkpoint of step kStep into `sharded` and, as Trainer::save does for
// the whole format, each shard's gathered state into `whole`.
void write_both(int world, const PlanOptions& options, const std::string& sharded, const std::string& whole) {
  parallel::testing::on_ranks(world, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(options, comm, nullptr, parallel::testing::char_transformer(5, /*heads=*/2), nn::cross_entropy_loss);
    auto opt = adam(pm.plan->optimizer_parameters(*pm.model));
    pm.plan->setup(*pm.model, {}, opt.get());
    train_steps(pm, *opt, 2);
    ShardWriter writer({.dir = sharded, .world = world, .async = true, .keep = 2, .timeout = std::chrono::seconds(20)});
    ShardSave s;
    s.tensors = rank_pieces(*pm.plan, *pm.model, *opt);
    s.index = {.rank = rank, .session = "test", .step = kStep, .shard = pm.plan->shard_name(),
               .data_rank = pm.plan->data_rank(), .params = names_of(pm.model->named_parameters()),
               .state = names_of(pm.model->state_dict())};
    if (rank == 0) {
      s.manifest = {.step = kStep, .layout = pm.plan->describe(), .optimizer = opt->state_dict().scalars};
    }
    writer.save(std::move(s));
    for (const SaveOutcome& o : writer.finished(true)) ASSERT_EQ(o.error, "") << "rank " << rank;

    Checkpoint c;
    c.model = pm.plan->model_state(*pm.model);
    c.optimizer = pm.plan->optimizer_state(*opt);
    c.step = kStep;
    if (!pm.plan->writes_checkpoints()) return;
    const nlohmann::json order = names_of(pm.model->named_parameters());
    c.extra = {{"params", order}};
    const std::string shard = pm.plan->shard_name();
    if (!shard.empty()) {
      c.extra["shard"] = {{"name", shard}, {"tensor", pm.plan->mesh().degree(parallel::Axis::tensor)},
                          {"pipeline", pm.plan->mesh().degree(parallel::Axis::pipeline)},
                          {"specs", parallel::to_json(pm.plan->shards())}, {"params", order}};
    }
    save_checkpoint(shard.empty() ? whole : whole + "/shard-" + shard, c);
  });
}

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  const Tensor a = got.contiguous(), b = want.contiguous();
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << what << " differs";
}

void expect_same(const nn::NamedTensors& got, const nn::NamedTensors& want, const std::string& what) {
  std::map<std::string, Tensor> by_name(want.begin(), want.end());
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, t] : got) {
    ASSERT_TRUE(by_name.count(name)) << what << ": unexpected " << name;
    expect_same(t, by_name.at(name), what + " " + name);
  }
}

// Loads the sharded checkpoint under `options` on `world` ranks as the
// trainer resumes (before setup), then gathers each shard's state the way
// whole checkpoints do: it must equal the whole checkpoint cut for that part.
void expect_resumes(int world, const PlanOptions& options, const std::string& sharded, const Checkpoint& whole,
                    const std::vector<std::string>& whole_order, const std::string& what) {
  parallel::testing::on_ranks(world, [&](int, comm::Communicator comm) {
    PlannedModel pm = make_plan(options, comm, nullptr, parallel::testing::char_transformer(99, /*heads=*/2), nn::cross_entropy_loss);
    auto opt = adam(pm.plan->optimizer_parameters(*pm.model));
    const RankPart part = part_of(*pm.plan, *pm.model);
    std::vector<std::string> notes, skipped;
    std::optional<Checkpoint> c = load_for_part(sharded, part, &notes, &skipped);
    ASSERT_TRUE(c.has_value()) << what;
    ASSERT_TRUE(skipped.empty()) << what << ": " << skipped.front();
    EXPECT_EQ(c->step, kStep);
    pm.plan->load_model_state(*pm.model, c->model);
    pm.plan->load_optimizer_state(*opt, c->optimizer);
    pm.plan->setup(*pm.model, {}, opt.get());
    const nn::NamedTensors model = pm.plan->model_state(*pm.model);
    const optim::OptimizerState state = pm.plan->optimizer_state(*opt);
    if (!pm.plan->writes_checkpoints()) return;
    const Checkpoint want = part_of_whole(whole, whole_order, part);
    const std::string where = what + " (shard " + part.shard + ")";
    expect_same(model, want.model, where + ": model");
    expect_same(state.tensors, want.optimizer.tensors, where + ": optimizer");
  });
}

struct Case {
  const char* name;
  int world1;
  PlanOptions plan1;
  int world2;
  PlanOptions plan2;
};

TEST(ShardedCheckpoint, EqualsTheGatheredCheckpointAndReshardsAcrossPlans) {
  const std::vector<Case> cases = {
      {"ZeRO-1 on 2 -> ZeRO-3 on 3", 2, plan_of("zero", 1), 3, plan_of("zero", 3)},
      {"ZeRO-3 on 2 -> tensor 2", 2, plan_of("zero", 3), 2, plan_of("auto", 1, {.tensor = 2})},
      {"allreduce on 2 -> ZeRO-2 on 4", 2, plan_of("allreduce", 1), 4, plan_of("zero", 2)},
      {"tensor 2 -> pipeline 2", 2, plan_of("auto", 1, {.tensor = 2}), 2, plan_of("auto", 1, {.pipeline = 2})},
      {"pipeline 2 -> one process", 2, plan_of("auto", 1, {.pipeline = 2}), 1, plan_of("none", 1)},
      {"data 2 x tensor 2 ZeRO-1 -> data 2 x pipeline 2", 4, plan_of("zero", 1, {.tensor = 2}), 4,
       plan_of("allreduce", 1, {.pipeline = 2})},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    test::TempDir dir;
    const std::string sharded = dir.file("sharded"), whole_dir = dir.file("whole");
    write_both(c.world1, c.plan1, sharded, whole_dir);
    // What the shards hold is the gathered whole, bit for bit.
    const Checkpoint whole = load_whole_checkpoint(whole_dir, kStep);
    const Checkpoint from_shards = load_sharded_whole(sharded, kStep);
    expect_same(from_shards.model, whole.model, std::string(c.name) + ": whole model");
    std::vector<std::string> order = whole.extra.value("params", std::vector<std::string>{});
    if (order.empty()) order = shard_param_order(whole_dir, kStep);
    EXPECT_EQ(from_shards.extra.at("params").get<std::vector<std::string>>(), order);
    expect_same(from_shards.optimizer.tensors, whole.optimizer.tensors, std::string(c.name) + ": whole optimizer");
    // No rank wrote the others' state: the shards hold each element once (a
    // tensor-parallel axis repeats the tensors it replicates).
    expect_resumes(c.world2, c.plan2, sharded, whole, order, c.name);
  }
}

TEST(ShardedCheckpoint, AZeroRankReadsOnlyItsRunsOfTheOptimizerState) {
  test::TempDir dir;
  write_both(2, plan_of("zero", 1), dir.file("sharded"), dir.file("whole"));
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(checkpoint_stem(dir.file("sharded"), kStep))) {
    if (e.path().extension() == ".safetensors") total += static_cast<int64_t>(fs::file_size(e.path()));
  }
  std::vector<int64_t> read(2);
  parallel::testing::on_ranks(2, [&](int rank, comm::Communicator comm) {
    PlannedModel pm = make_plan(plan_of("zero", 1), comm, nullptr, parallel::testing::char_transformer(99, /*heads=*/2), nn::cross_entropy_loss);
    load_sharded_for_part(dir.file("sharded"), kStep, part_of(*pm.plan, *pm.model), &read[static_cast<size_t>(rank)]);
  });
  // Adam's two buffers are twice the model: each rank reads the whole model
  // and half of them, about two thirds of what all ranks wrote.
  for (int64_t r : read) {
    EXPECT_GT(r, total / 2);
    EXPECT_LT(r, total * 3 / 4) << "read " << r << " of " << total << " bytes";
  }
}

}  // namespace
}  // namespace braid::train
