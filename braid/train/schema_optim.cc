// [optim]: optimizer and learning-rate schedule.
#include "braid/train/schema.h"

namespace braid::train {

void add_optim_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "optim.name", .type = T::String, .default_value = std::string("sgd"), .help = "optimizer",
         .choices = {"sgd", "adagrad", "rmsprop", "adam", "adamw", "lars", "lamb", "lbfgs"}});
  s.add({.name = "optim.lr", .type = T::Float, .default_value = 0.05, .help = "peak learning rate", .min = 0.0});
  s.add({.name = "optim.momentum", .type = T::Float, .default_value = 0.9,
         .help = "momentum (sgd, rmsprop, lars)", .min = 0.0, .max = 1.0});
  s.add({.name = "optim.nesterov", .type = T::Bool, .default_value = false, .help = "Nesterov momentum (sgd)"});
  s.add({.name = "optim.weight_decay", .type = T::Float, .default_value = 0.0,
         .help = "L2 penalty (decoupled for adamw, lamb)", .min = 0.0});
  s.add({.name = "optim.beta1", .type = T::Float, .default_value = 0.9,
         .help = "first-moment decay (adam, adamw, lamb)", .min = 0.0, .max = 1.0});
  s.add({.name = "optim.beta2", .type = T::Float, .default_value = 0.999,
         .help = "second-moment decay (adam, adamw, lamb; rmsprop's alpha)", .min = 0.0, .max = 1.0});
  s.add({.name = "optim.decay_filter", .type = T::String, .default_value = std::string("auto"),
         .help = "which parameters optim.weight_decay applies to: matrices = those of 2 or more dimensions (weights of "
                 "linear, convolution and embedding layers; not biases or norm gains, as nanoGPT and Megatron-LM "
                 "group them), all = every parameter; auto = matrices for adamw, all for the others",
         .choices = {"auto", "matrices", "all"}});
  s.add({.name = "optim.eps", .type = T::Float, .default_value = 1e-8, .help = "denominator epsilon", .min = 0.0});
  s.add({.name = "optim.schedule", .type = T::String, .default_value = std::string("constant"),
         .help = "learning-rate schedule after warmup", .choices = {"constant", "step", "cosine"}});
  s.add({.name = "optim.warmup_steps", .type = T::Int, .default_value = int64_t{0},
         .help = "linear warmup from 0 to lr over this many steps", .min = 0});
  s.add({.name = "optim.min_lr", .type = T::Float, .default_value = 0.0,
         .help = "cosine: the floor the learning rate decays to and stays at after optim.decay_steps (nanoGPT's "
                 "min_lr, Megatron-LM's --min-lr; often lr / 10)", .min = 0.0});
  s.add({.name = "optim.decay_steps", .type = T::Int, .default_value = int64_t{0},
         .help = "cosine: the step (counted from the start, warmup included) at which the decay reaches "
                 "optim.min_lr; 0 = the run's planned optimizer steps (train.max_steps, or the epochs')", .min = 0});
  s.add({.name = "optim.step_size", .type = T::Int, .default_value = int64_t{1000},
         .help = "steps between decays (step schedule)", .min = 1});
  s.add({.name = "optim.gamma", .type = T::Float, .default_value = 0.1,
         .help = "decay factor per step_size (step schedule)", .min = 0.0});
}

}  // namespace braid::train
