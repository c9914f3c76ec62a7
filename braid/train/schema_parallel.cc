// [parallel]: how training is distributed.
#include "braid/train/schema.h"

namespace braid::train {

void add_parallel_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "parallel.strategy", .type = T::String, .default_value = std::string("none"),
         .help = "distribution strategy: none = one process; allreduce = synchronous data parallelism "
                 "(gradients averaged in buckets that overlap backward)",
         .choices = {"none", "allreduce"}});
  s.add({.name = "parallel.transport", .type = T::String, .default_value = std::string("auto"),
         .help = "how ranks talk: auto = shm when all ranks share this host, else tcp",
         .choices = {"auto", "tcp", "shm", "mpi"}, .env = "BRAID_TRANSPORT"});
  s.add({.name = "parallel.bucket_kb", .type = T::Int, .default_value = int64_t{1024},
         .help = "gradient bucket size in KiB (allreduce)", .min = 1.0});
  s.add({.name = "parallel.overlap", .type = T::Bool, .default_value = true,
         .help = "start each bucket's all-reduce during backward (false: all after backward)"});
  s.add({.name = "parallel.algorithm", .type = T::String, .default_value = std::string("auto"),
         .help = "all-reduce algorithm; auto picks by the alpha-beta cost model",
         .choices = {"auto", "ring", "recursive_doubling", "halving_doubling", "binary_tree", "double_binary_tree",
                     "binary_blocks", "direct", "hierarchical"}});
  s.add({.name = "parallel.timeout_s", .type = T::Float, .default_value = 300.0,
         .help = "seconds any collective may wait for a peer before failing with the missing rank's name",
         .min = 0.1});
}

}  // namespace braid::train
