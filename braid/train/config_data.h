// Builds the datasets and loaders that the `data.*` and `train.*` keys describe,
// so `braid train`, `braid inspect data` and tests wire them the same way.
#pragma once

#include <memory>

#include "braid/data/loader.h"
#include "braid/data/open.h"
#include "braid/data/synthetic.h"
#include "braid/train/config.h"

namespace braid::train {

// data.name, data.path, data.normalize and (for text) model.context.
data::OpenOptions dataset_options(const Config& c, bool train);

// data.shape, data.classes, data.examples and train.seed (data.name = synthetic).
data::SyntheticImagesOptions synthetic_options(const Config& c);

struct LoaderPlacement {
  int rank = 0;   // this process among `world` data-parallel ranks
  int world = 1;
};

// The order a rank visits `n` training examples in, by data.sampling and
// train.seed: its DistributedSampler shard (padded by wrapping; at world 1
// the whole shuffled or sequential order, or draws with replacement).
std::shared_ptr<const data::Sampler> make_train_sampler(const Config& c, int64_t n, LoaderPlacement placement = {});

// Training batches: train.batch_size per rank, data.workers threads, in
// make_train_sampler's order, random crop (padding 2) + horizontal flip
// when data.augment and the examples are [C, H, W] images.
std::unique_ptr<data::Loader> make_train_loader(const Config& c, std::shared_ptr<const data::Dataset> dataset,
                                                LoaderPlacement placement = {});
// Evaluation batches: every example once, in order, no augmentation.
std::unique_ptr<data::Loader> make_eval_loader(const Config& c, std::shared_ptr<const data::Dataset> dataset);

}  // namespace braid::train
