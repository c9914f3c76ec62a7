// [parallel]: how training is distributed.
#include "braid/train/schema.h"

namespace braid::train {

void add_parallel_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "parallel.strategy", .type = T::String, .default_value = std::string("none"),
         .help = "distribution strategy; none = one process", .choices = {"none"}});
}

}  // namespace braid::train
