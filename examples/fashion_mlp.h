// The model and data the dense examples share, so each example shows only how
// it trains: a 784-256-256-10 MLP on Fashion-MNIST.
#pragma once

#include <braid/braid.h>

#include <memory>

namespace example {

// [n, 1, 28, 28] -> flatten -> Linear ReLU Linear ReLU Linear -> [n, 10] logits.
inline std::shared_ptr<braid::nn::Module> make_mlp(uint64_t seed) {
  braid::Generator init(seed);  // Philox: the same weights on every machine and every rank
  using braid::nn::Module;
  return std::make_shared<braid::nn::Sequential>(std::vector<std::shared_ptr<Module>>{
      std::make_shared<braid::nn::Flatten>(), std::make_shared<braid::nn::Linear>(784, 256, init),
      std::make_shared<braid::nn::ReLU>(), std::make_shared<braid::nn::Linear>(256, 256, init),
      std::make_shared<braid::nn::ReLU>(), std::make_shared<braid::nn::Linear>(256, 10, init)});
}

struct Loaders {
  std::shared_ptr<braid::data::Loader> train, test;
};

// Images [1, 28, 28] f32, normalised, and i64 class ids, from Debian's
// dataset-fashion-mnist (data::kFashionMnistDir). The training set is split
// among `world` ranks: each reads a disjoint shard of every epoch's shuffle
// (same seed on every rank); every rank evaluates on the whole test set.
inline Loaders fashion_mnist(int rank, int world, int64_t batch_size) {
  using namespace braid::data;
  auto train_set = std::make_shared<FashionMnist>(FashionMnistOptions{.train = true});
  auto test_set = std::make_shared<FashionMnist>(FashionMnistOptions{.train = false});
  auto shard = std::make_shared<DistributedSampler>(train_set->size(),
                                                    DistributedSamplerOptions{.rank = rank, .world = world, .seed = 0});
  return {std::make_shared<Loader>(train_set, shard, LoaderOptions{.batch_size = batch_size}),
          std::make_shared<Loader>(test_set, std::make_shared<SequentialSampler>(test_set->size()),
                                   LoaderOptions{.batch_size = 256})};
}

}  // namespace example
