#include "braid/sim/memory.h"

#include "braid/nn/recompute.h"
#include "braid/nn/sequential.h"
#include "braid/train/trainer_setup.h"

namespace braid::sim {

std::vector<train::MemoryPlan> plan_memory_per_stage(const train::Config& config, const PlanSpec& plan,
                                                     const std::vector<int>& stage_of_layer) {
  auto model = std::dynamic_pointer_cast<nn::Sequential>(train::model_and_batch(config).model);
  std::vector<train::MemoryPlan> out;
  const int stages = std::max(plan.pipeline, 1);
  if (!model) {
    train::MemoryShape shape = train::memory_shape(config, 0, 1);
    shape.data = plan.data;
    out.push_back(train::plan_memory(*train::model_and_batch(config).model, shape));
    return out;
  }
  const nn::Recompute mode = nn::parse_recompute(plan.recompute);
  if (mode != nn::Recompute::none) nn::apply_recompute(*model, {.mode = mode, .layers = plan.recompute_layers});
  for (int s = 0; s < stages; ++s) {
    nn::Sequential stage;
    for (size_t l = 0; l < model->size(); ++l) {
      const int at = stage_of_layer.empty() ? 0 : stage_of_layer.at(l);
      if (at % stages == s) stage.push_back(model->name_of(l), model->layer(l));  // interleaved: all of rank s's chunks
    }
    train::MemoryShape shape = train::memory_shape(config, s, stages);
    shape.data = plan.data;
    // The whole layers (no tensor shards here): their whole sequence too.
    shape.sequence_shards = 1;
    out.push_back(train::plan_memory(stage, shape));
  }
  return out;
}

}  // namespace braid::sim
