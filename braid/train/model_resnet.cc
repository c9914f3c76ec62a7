// model.name = resnet: the model.* keys into models::ResNetConfig.
#include "braid/models/resnet.h"
#include "braid/train/model_families.h"

namespace braid::train {

std::shared_ptr<nn::Module> build_resnet(const Config& config, const ModelInfo& info, Generator& gen) {
  if (info.input_shape.size() != 3) {
    fail<ConfigError>("model.name = resnet needs image inputs [C, H, W], the dataset gives {}",
                      to_string(info.input_shape));
  }
  const std::string& norm = config.get_string("model.norm");
  if (norm != "batch" && norm != "sync_batch" && norm != "ghost_batch") {
    fail<ConfigError>("model.name = resnet has batch norm after every convolution: set model.norm = batch, "
                      "sync_batch or ghost_batch (it is {})", norm);
  }
  const int64_t depth = config.get_int("model.depth");
  if (depth != 18 && depth != 34 && depth != 50) {
    fail<ConfigError>("model.depth = {} is not a ResNet braid builds: 18, 34 or 50", depth);
  }
  const models::ResNetConfig rc{
      .depth = static_cast<int>(depth),
      .classes = info.classes,
      .in_channels = info.input_shape[0],
      .stem = models::parse_resnet_stem(config.get_string("model.stem")),
      .zero_init_residual = config.get_bool("model.zero_init_residual"),
      .norm = {.ghost_batch = norm == "ghost_batch" ? config.get_int("model.ghost_batch") : 0},
  };
  return models::resnet(rc, gen);
}

}  // namespace braid::train
