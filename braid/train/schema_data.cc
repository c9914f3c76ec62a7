// [data]: dataset, loader and augmentation.
#include "braid/train/schema.h"

namespace braid::train {

void add_data_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "data.name", .type = T::String, .default_value = std::string("fashion_mnist"),
         .help = "dataset format: fashion_mnist (IDX folder), csv, libsvm, text (character-level), tokens (token "
                 "shards of braid tokenize encode; data.path a glob), synthetic (images computed from train.seed: "
                 "data.shape, data.classes, data.examples; for sizes no installed data set has)",
         .choices = {"fashion_mnist", "csv", "libsvm", "text", "tokens", "synthetic"}});
  s.add({.name = "data.path", .type = T::String, .default_value = std::string("/usr/share/datasets/fashion-mnist"),
         .help = "dataset folder (fashion_mnist) or file (csv, libsvm, text; a folder of text files for text)",
         .env = "BRAID_DATA_PATH"});
  s.add({.name = "data.stride", .type = T::Int, .default_value = int64_t{0},
         .help = "text, tokens: characters (tokens) between the starts of consecutive windows; 0 = model.context (no "
                 "overlap)",
         .min = 0});
  s.add({.name = "data.hash_buckets", .type = T::Int, .default_value = int64_t{0},
         .help = "sparse_linear: fold feature ids into this many embedding rows by hashing (0: one row per id)",
         .min = 0.0});
  s.add({.name = "data.shape", .type = T::String, .default_value = std::string("3x224x224"),
         .help = "synthetic: channels x height x width of each image"});
  s.add({.name = "data.classes", .type = T::Int, .default_value = int64_t{1000},
         .help = "synthetic: classes (each a colour the images scatter around)", .min = 1});
  s.add({.name = "data.examples", .type = T::Int, .default_value = int64_t{12800},
         .help = "synthetic: examples, the last 10% held out for evaluation", .min = 2});
  s.add({.name = "data.workers", .type = T::Int, .default_value = int64_t{1},
         .help = "background loader threads; 0 = load on the training thread; at most 8 per core of the machine "
                 "(checked when training starts)", .min = 0, .max = 4096});
  s.add({.name = "data.augment", .type = T::Bool, .default_value = false,
         .help = "random crop (padding 2) and horizontal flip of training images"});
  s.add({.name = "data.normalize", .type = T::Bool, .default_value = true,
         .help = "Fashion-MNIST: subtract mean 0.2860, divide by std 0.3530"});
  s.add({.name = "data.validation", .type = T::Int, .default_value = int64_t{0},
         .help = "hold out the last N training examples as a validation set (never trained on; braid pbt ranks "
                 "members by it); 0 = none", .min = 0});
  s.add({.name = "data.sampling", .type = T::String, .default_value = std::string("shuffle"),
         .help = "how each epoch visits the training set: shuffle = a fresh permutation, split disjointly over the "
                 "data-parallel ranks; replacement = each rank draws uniformly with replacement from the whole set; "
                 "sequential = in order (seeded by train.seed)",
         .choices = {"shuffle", "replacement", "sequential"}});
}

}  // namespace braid::train
