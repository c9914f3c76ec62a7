#include "braid/train/config_data.h"

#include <algorithm>

namespace braid::train {

data::OpenOptions dataset_options(const Config& c, bool train) {
  data::OpenOptions o{.name = c.get_string("data.name"),
                      .path = c.get_string("data.path"),
                      .train = train,
                      .normalize = c.get_bool("data.normalize"),
                      .context = c.get_int("model.context"),
                      .stride = c.get_int("data.stride")};
  if (o.name == "synthetic") o.synthetic = synthetic_options(c);
  return o;
}

data::SyntheticImagesOptions synthetic_options(const Config& c) {
  const std::string& shape = c.get_string("data.shape");
  data::SyntheticImagesOptions o{.examples = c.get_int("data.examples"),
                                 .classes = c.get_int("data.classes"),
                                 .seed = static_cast<uint64_t>(c.get_int("train.seed"))};
  try {
    o.shape = data::parse_image_shape(shape);
  } catch (const ValueError& e) {
    fail<ConfigError>("data.shape = {}: {}", shape, e.what());
  }
  return o;
}

std::shared_ptr<const data::Sampler> make_train_sampler(const Config& c, int64_t n, LoaderPlacement p) {
  const auto seed = static_cast<uint64_t>(c.get_int("train.seed"));
  const std::string& how = c.get_string("data.sampling");
  // At world 1 a DistributedSampler visits the order ShuffledSampler or
  // SequentialSampler would, so one sampler serves every case.
  return std::make_shared<data::DistributedSampler>(
      n, data::DistributedSamplerOptions{.rank = p.rank, .world = p.world, .seed = seed,
                                         .shuffle = how != "sequential", .replacement = how == "replacement"});
}

std::unique_ptr<data::Loader> make_train_loader(const Config& c, std::shared_ptr<const data::Dataset> dataset,
                                                LoaderPlacement p) {
  const auto seed = static_cast<uint64_t>(c.get_int("train.seed"));
  std::shared_ptr<const data::Sampler> sampler = make_train_sampler(c, dataset->size(), p);
  data::Transforms transforms;
  const data::ExampleSpec spec = dataset->spec();
  // Crops and flips are for images: other inputs never read data.augment (so setting it is refused).
  if (spec.input_dtype == DType::f32 && spec.input_shape.size() == 3 && c.get_bool("data.augment")) {
    transforms = {std::make_shared<data::RandomCrop>(2), std::make_shared<data::HorizontalFlip>(0.5f)};
  }
  // Refused here, by name: a batch larger than the examples this rank reads
  // made 0 batches an epoch (a run of 0 steps, loss nan, exit 0), and a
  // huge one overflowed the batch count or ran out of memory unnamed.
  const int64_t batch = c.get_int("train.batch_size"), examples = sampler->size();
  if (batch > examples) {
    fail<ConfigError>("train.batch_size = {} is larger than the {} training examples this rank reads per epoch{}; "
                      "use at most {}", batch, examples,
                      p.world > 1 ? fmt::format(" (its share over {} data-parallel ranks)", p.world) : "", examples);
  }
  data::LoaderOptions o{.batch_size = batch,
                        .workers = static_cast<int>(c.get_int("data.workers")),
                        // A different key from the sampler's, so shuffling and augmentation are independent.
                        .seed = seed ^ 0x9e3779b97f4a7c15ull};
  return std::make_unique<data::Loader>(std::move(dataset), std::move(sampler), o, std::move(transforms));
}

std::unique_ptr<data::Loader> make_eval_loader(const Config& c, std::shared_ptr<const data::Dataset> dataset) {
  auto sampler = std::make_shared<data::SequentialSampler>(dataset->size());
  // Evaluation sums over examples, so a batch past the set's size changes
  // nothing but the memory it would reserve.
  data::LoaderOptions o{.batch_size = std::max<int64_t>(1, std::min(c.get_int("train.batch_size"), dataset->size())),
                        .workers = static_cast<int>(c.get_int("data.workers"))};
  return std::make_unique<data::Loader>(std::move(dataset), std::move(sampler), o);
}

}  // namespace braid::train
