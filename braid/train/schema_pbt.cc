// [pbt]: population-based training (`braid pbt`, docs/training.md).
#include "braid/train/schema.h"

namespace braid::train {

void add_pbt_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "pbt.interval", .type = T::Int, .default_value = int64_t{10000},
         .help = "examples a member trains between rounds (score, report, exploit/explore)", .min = 1});
  s.add({.name = "pbt.fraction", .type = T::Float, .default_value = 0.25,
         .help = "truncation selection: a member in the bottom fraction copies one drawn from the top fraction",
         .min = 0.01, .max = 0.5});
  s.add({.name = "pbt.perturb", .type = T::Float, .default_value = 1.2,
         .help = "explore: each searched hyper-parameter times this or divided by it (batch size: one power of two)",
         .min = 1.0});
  s.add({.name = "pbt.exploit", .type = T::Bool, .default_value = true,
         .help = "false: members never copy each other (independent runs from random hyper-parameters, the baseline)"});
  s.add({.name = "pbt.lr", .type = T::String, .default_value = std::string("0.003,0.3"),
         .help = "learning-rate range \"low,high\" members start from (log-uniform) and stay within; \"\" = optim.lr "
                 "for every member, not searched"});
  s.add({.name = "pbt.momentum", .type = T::String, .default_value = std::string(""),
         .help = "momentum range (uniform), e.g. \"0.5,0.99\"; \"\" = optim.momentum, not searched"});
  s.add({.name = "pbt.weight_decay", .type = T::String, .default_value = std::string(""),
         .help = "weight-decay range (log-uniform), e.g. \"1e-6,1e-3\"; \"\" = optim.weight_decay, not searched"});
  s.add({.name = "pbt.batch_size", .type = T::String, .default_value = std::string(""),
         .help = "batch-size range (powers of two), e.g. \"32,256\"; a new batch takes effect at the next epoch; "
                 "\"\" = train.batch_size, not searched"});
  s.add({.name = "pbt.wait_s", .type = T::Float, .default_value = 3600.0,
         .help = "how long member 0 waits, after its own training, for the others' final results", .min = 1.0,
         .max = 3.2e7});  // a year; durations are nanoseconds in an int64
}

}  // namespace braid::train
