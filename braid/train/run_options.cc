#include "braid/train/run_options.h"

#include "braid/train/trainer.h"
#include "braid/optim/adagrad.h"
#include "braid/optim/adam.h"
#include "braid/optim/lamb.h"
#include "braid/optim/lars.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/sgd.h"

namespace braid::train {

namespace {

// "3, 6" -> {3, 6}; "" -> {}.
std::vector<int> parse_int_list(const std::string& text, const char* key) {
  std::vector<int> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    try {
      size_t used = 0;
      out.push_back(std::stoi(item, &used));
      if (item.find_first_not_of(" \t", used) != std::string::npos) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      fail<ConfigError>("{} = \"{}\": '{}' is not an integer (expected e.g. \"3, 6\")", key, text, item);
    }
    at = end + 1;
  }
  return out;
}

Duration milliseconds(double ms) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(ms));
}

// parallel.codec and the codec.* keys that codec reads.
comm::codec::CodecOptions codec_options(const Config& c) {
  comm::codec::CodecOptions o{.name = c.get_string("parallel.codec")};
  if (o.name == "none") return o;
  if (o.name == "qsgd") {
    o.qsgd_levels = c.get_int("codec.qsgd_levels");
    o.qsgd_chunk = c.get_int("codec.qsgd_chunk");
  }
  if (o.name == "onebit") o.onebit_chunk = c.get_int("codec.onebit_chunk");
  if (o.name == "topk") o.topk_ratio = c.get_float("codec.topk_ratio");
  if (o.name == "powersgd") {
    o.powersgd_rank = c.get_int("codec.powersgd_rank");
    o.powersgd_min_rate = c.get_float("codec.powersgd_min_rate");
  }
  // The codecs that drop part of each gradient remember what they dropped.
  if (o.name == "onebit" || o.name == "topk" || o.name == "powersgd") o.error_feedback = c.get_bool("codec.error_feedback");
  o.warmup_steps = c.get_int("codec.warmup_steps");
  o.min_elements = c.get_int("codec.min_elements");
  o.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  return o;
}

}  // namespace

namespace {

std::unique_ptr<optim::Optimizer> build_optimizer(const Config& c, const std::string& name, std::vector<Tensor> params,
                                                  double wd) {
  auto lr = [&] { return c.get_float("optim.lr"); };
  auto mom = [&] { return c.get_float("optim.momentum"); };
  auto b1 = [&] { return c.get_float("optim.beta1"); };
  auto b2 = [&] { return c.get_float("optim.beta2"); };
  auto eps = [&] { return c.get_float("optim.eps"); };
  if (name == "sgd") {
    return std::make_unique<optim::SGD>(params, optim::SGDOptions{.lr = lr(), .momentum = mom(), .weight_decay = wd,
                                                                   .nesterov = c.get_bool("optim.nesterov")});
  }
  if (name == "adam") {
    return std::make_unique<optim::Adam>(params, optim::AdamOptions{.lr = lr(), .beta1 = b1(), .beta2 = b2(),
                                                                     .eps = eps(), .weight_decay = wd});
  }
  if (name == "adamw") {
    return std::make_unique<optim::AdamW>(params, optim::AdamWOptions{.lr = lr(), .beta1 = b1(), .beta2 = b2(),
                                                                       .eps = eps(), .weight_decay = wd});
  }
  if (name == "adagrad") {
    return std::make_unique<optim::AdaGrad>(params, optim::AdaGradOptions{.lr = lr(), .weight_decay = wd});
  }
  if (name == "rmsprop") {
    return std::make_unique<optim::RMSProp>(params, optim::RMSPropOptions{.lr = lr(), .alpha = b2(), .eps = eps(),
                                                                           .weight_decay = wd, .momentum = mom()});
  }
  if (name == "lars") {
    return std::make_unique<optim::LARS>(params, optim::LARSOptions{.lr = lr(), .momentum = mom(), .weight_decay = wd});
  }
  if (name == "lamb") {
    return std::make_unique<optim::LAMB>(params, optim::LAMBOptions{.lr = lr(), .beta1 = b1(), .beta2 = b2(),
                                                                     .weight_decay = wd});
  }
  fail<ConfigError>("optim.name = {} cannot drive minibatch training (L-BFGS needs a full-batch closure; use the "
                    "library API)", name);
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const Config& c, std::vector<Tensor> params,
                                                 const std::vector<int64_t>& ndims) {
  const std::string& name = c.get_string("optim.name");
  const double wd = c.get_float("optim.weight_decay");
  if (!ndims.empty() && ndims.size() != params.size()) {
    fail<ValueError>("make_optimizer: {} dimension counts for {} parameters", ndims.size(), params.size());
  }
  std::vector<int64_t> dims = ndims;
  if (dims.empty()) {
    for (const Tensor& p : params) dims.push_back(p.ndim());
  }
  std::unique_ptr<optim::Optimizer> opt = build_optimizer(c, name, std::move(params), wd);
  // Which parameters decay matters only where something decays.
  if (wd > 0) {
    std::string filter = c.get_string("optim.decay_filter");
    if (filter == "auto") filter = name == "adamw" ? "matrices" : "all";
    if (filter == "matrices") opt->set_decay_mask(optim::matrix_decay_mask(dims));
  }
  return opt;
}

optim::ScheduleOptions schedule_options(const Config& c, int64_t total_steps) {
  optim::ScheduleOptions o{.name = c.get_string("optim.schedule"), .base_lr = c.get_float("optim.lr"),
                           .total_steps = total_steps};
  if (o.name == "step") {
    o.step_size = c.get_int("optim.step_size");
    o.gamma = c.get_float("optim.gamma");
  }
  o.warmup_steps = c.get_int("optim.warmup_steps");
  if (o.name == "cosine") {
    o.min_lr = c.get_float("optim.min_lr");
    if (o.min_lr > o.base_lr) {
      fail<ConfigError>("optim.min_lr = {} is above optim.lr = {}: the cosine decays from lr down to min_lr", o.min_lr,
                        o.base_lr);
    }
    if (const int64_t decay = c.get_int("optim.decay_steps"); decay > 0) {
      if (decay <= o.warmup_steps) {
        fail<ConfigError>("optim.decay_steps = {} must exceed optim.warmup_steps = {}: the decay starts where the "
                          "warmup ends", decay, o.warmup_steps);
      }
      o.total_steps = decay;
    }
  }
  return o;
}

std::shared_ptr<BatchSchedule> make_batch_schedule(const Config& c, int replicas) {
  const std::string& rule = c.get_string("train.batch_schedule");
  if (rule == "none") return nullptr;
  BatchScheduleOptions o{.rule = rule, .batch = c.get_int("train.batch_size"), .growth = c.get_float("train.batch_growth"),
                         .max = c.get_int("train.batch_max"), .lr_scaling = c.get_string("train.lr_scaling"),
                         .replicas = replicas};
  if (rule == "epoch") o.every = c.get_int("train.batch_every");
  if (rule == "noise") o.noise_window = c.get_int("train.noise_window");
  return std::make_shared<BatchSchedule>(o);
}

parallel::ProcessGroupOptions process_group_options(const Config& c) {
  const std::chrono::duration<double> timeout(c.get_float("parallel.timeout_s"));
  const std::string& transport = c.get_string("parallel.transport");
  return {.transport = transport,
          // tcp_streams stripes tcp connections; max_message bounds the stream transports (tcp, shm).
          .tcp_streams = transport == "auto" || transport == "tcp" ? static_cast<int>(c.get_int("parallel.tcp_streams")) : 0,
          .max_message = transport != "mpi" ? static_cast<size_t>(c.get_int("parallel.max_message_mib")) << 20 : 0,
          .timeout = std::chrono::duration_cast<Duration>(timeout),
          .join_timeout = std::chrono::duration_cast<Duration>(
              std::chrono::duration<double>(c.get_float("parallel.join_timeout_s"))),
          .history_dir = c.get_string("train.out_dir") + "/history"};
}

parallel::ParameterServerOptions ps_options(const Config& c, int servers, Duration timeout) {
  std::string dir = c.get_string("ps.checkpoint_dir");
  if (dir.empty()) dir = c.get_string("train.out_dir") + "/ps";
  parallel::ParameterServerOptions o{.servers = servers, .n_fetch = c.get_int("ps.n_fetch"),
                                     .n_push = c.get_int("ps.n_push"), .timeout = timeout};
  ps::PsConfig& s = o.config;
  s.consistency = ps::parse_consistency(c.get_string("ps.consistency"));
  using ps::Consistency;
  if (s.consistency == Consistency::ssp) s.staleness = c.get_int("ps.staleness");
  if (s.consistency == Consistency::softsync) s.softsync_n = c.get_int("ps.softsync_n");
  if (s.consistency == Consistency::bsp) s.backup_workers = c.get_int("ps.backup_workers");
  // The servers' updater takes its hyper-parameters from optim.* (lr arrives with every push).
  ps::UpdaterOptions& u = s.updater;
  u.name = c.get_string("ps.updater");
  if (u.name == "momentum") {
    u.momentum = c.get_float("optim.momentum");
    if (s.consistency != Consistency::bsp) u.offset_async = c.get_string("ps.async_momentum") == "offset";
  }
  if (u.name == "adam") {
    u.beta1 = c.get_float("optim.beta1");
    u.beta2 = c.get_float("optim.beta2");
    u.eps = c.get_float("optim.eps");
  }
  u.weight_decay = c.get_float("optim.weight_decay");
  // The servers decay every parameter; a filter would be silently ignored.
  if (u.weight_decay > 0 && c.get_string("optim.decay_filter") == "matrices") {
    fail<ConfigError>("optim.decay_filter = matrices: parameter servers apply optim.weight_decay to every parameter "
                      "(use optim.decay_filter = all or auto)");
  }
  s.checkpoint_dir = dir;
  s.checkpoint_every = c.get_int("ps.checkpoint_every");
  // The servers hold the model: under auto and always they continue from
  // their newest shards when there are any (a group restarted by `braid
  // launch --max-restarts` included), as the trainer does from its checkpoints.
  s.resume = parse_resume(c.get_string("train.resume")) != Resume::never;
  s.seed = static_cast<uint64_t>(c.get_int("train.seed"));
  s.timeout_s = std::chrono::duration<double>(timeout).count();
  return o;
}

parallel::PlanOptions plan_options(const Config& c, Duration timeout, const std::string& strategy) {
  parallel::PlanOptions o;
  o.strategy = strategy.empty() ? c.get_string("parallel.strategy") : strategy;
  const std::string s = o.strategy == "auto" ? "allreduce" : o.strategy;
  o.mesh = {.data = static_cast<int>(c.get_int("parallel.data")),
            .tensor = static_cast<int>(c.get_int("parallel.tensor")),
            .pipeline = static_cast<int>(c.get_int("parallel.pipeline")),
            .context = static_cast<int>(c.get_int("parallel.context"))};
  if (o.mesh.context > 1) {
    if (const std::string& model = c.get_string("model.name"); model != "gpt") {
      fail<ConfigError>("parallel.context = {} splits the sequences of model.name = gpt; model.name = {} is not one",
                        o.mesh.context, model);
    }
    o.context_mode = c.get_string("parallel.context_mode");
  }
  o.sequence_parallel = c.get_bool("parallel.sequence_parallel");
  if (o.sequence_parallel && o.mesh.tensor <= 1) {
    fail<ConfigError>("parallel.sequence_parallel = true splits the sequence over the tensor axis; parallel.tensor = "
                      "{} has none (set parallel.tensor > 1 or parallel.sequence_parallel = false)", o.mesh.tensor);
  }
  if (o.sequence_parallel && o.mesh.context > 1) {
    fail<ConfigError>("parallel.sequence_parallel = true with parallel.context = {} is not built (each splits the "
                      "sequence; use one of them)", o.mesh.context);
  }
  if (o.mesh.tensor > 1) o.tp_overlap = c.get_bool("parallel.tp_overlap");
  o.expert = static_cast<int>(c.get_int("parallel.expert"));
  o.microbatches = static_cast<int>(c.get_int("parallel.microbatches"));
  if (o.mesh.pipeline > 1) {
    // A pipeline accumulates through its micro-batches: train.accumulate
    // micro-batches of train.batch_size run as one longer pipeline (the same
    // micro-batch size, a smaller bubble) rather than one pipeline each.
    const int64_t accumulate = c.get_int("train.accumulate");
    if (o.microbatches * accumulate > (int64_t{1} << 20)) {
      fail<ConfigError>("parallel.microbatches = {} x train.accumulate = {} is too many micro-batches", o.microbatches,
                        accumulate);
    }
    o.microbatches = static_cast<int>(o.microbatches * accumulate);
    o.schedule = c.get_string("parallel.schedule");
    o.stage_boundaries = parse_int_list(c.get_string("parallel.stage_boundaries"), "parallel.stage_boundaries");
    o.virtual_stages = static_cast<int>(c.get_int("parallel.virtual_stages"));
    if (o.stage_boundaries.empty()) o.balance = c.get_string("parallel.balance");
  } else {
    o.microbatch_max = c.get_int("parallel.microbatch_max");
  }
  o.recompute.mode = nn::parse_recompute(c.get_string("parallel.recompute"));
  if (o.recompute.mode != nn::Recompute::none) o.recompute.layers = c.get_int("parallel.recompute_layers");
  o.sync_batch_norm = c.get_string("model.norm") == "sync_batch";
  // The all-reduce algorithm of the strategies that all-reduce whole buffers.
  auto algorithm = [&] { return comm::parse_algorithm(c.get_string("parallel.algorithm")); };
  if (s == "allreduce" || s == "ps") o.codec = codec_options(c);
  if (s == "allreduce") {
    o.data_parallel = {.bucket_bytes = static_cast<size_t>(c.get_int("parallel.bucket_kb")) * 1024,
                       .overlap = c.get_bool("parallel.overlap"), .algorithm = algorithm(), .timeout = timeout};
  } else if (s == "zero") {
    o.zero = {.stage = static_cast<int>(c.get_int("parallel.zero_stage")), .timeout = timeout};
    if (o.zero.stage < 3) o.zero.bucket_bytes = static_cast<size_t>(c.get_int("parallel.bucket_kb")) * 1024;
    if (o.zero.stage == 3) o.zero.prefetch = c.get_bool("parallel.zero_prefetch");
  } else if (s == "skeleton") {
    o.skeleton = {.fraction = c.get_float("parallel.skeleton_fraction"), .every = c.get_int("parallel.skeleton_every"),
                  .seed = static_cast<uint64_t>(c.get_int("train.seed")), .algorithm = algorithm(),
                  .timeout = timeout};
  } else if (s == "local_sgd" || s == "bmuf") {
    o.averaging = {.period = c.get_int("local_sgd.period"), .warmup = c.get_int("local_sgd.warmup"),
                   .host_period = c.get_int("local_sgd.host_period"), .algorithm = algorithm(), .timeout = timeout};
    if (s == "bmuf") {
      o.averaging.block_momentum = c.get_float("bmuf.momentum");  // -1: resolved by make_plan
      o.averaging.block_lr = c.get_float("bmuf.lr");
      o.averaging.nesterov = c.get_bool("bmuf.nesterov");
    }
  } else if (s == "easgd") {
    o.easgd = {.beta = c.get_float("easgd.beta"), .tau = c.get_int("easgd.tau"),
               .async = c.get_string("easgd.mode") == "async", .timeout = timeout};
    if (!o.easgd.async) o.easgd.algorithm = algorithm();
  } else if (s == "admm") {
    o.admm = {.rho = c.get_float("admm.rho"), .tau = c.get_int("admm.tau"),
              .start_from_z = c.get_string("admm.warm_start") == "z", .async = c.get_string("admm.mode") == "async",
              .timeout = timeout};
    if (o.admm.async) {
      o.admm.barrier = c.get_int("admm.barrier");
      o.admm.max_delay = c.get_int("admm.max_delay");
    } else {
      o.admm.algorithm = algorithm();
    }
  } else if (s == "ensemble") {
    o.ensemble = {.data = parallel::parse_ensemble_data(c.get_string("ensemble.data")), .algorithm = algorithm(),
                  .timeout = timeout};
  } else if (s == "gossip") {
    o.gossip = {.topology = parallel::gossip::parse_topology(c.get_string("gossip.topology")),
                .final_average = c.get_bool("gossip.final_average"),
                .consensus_every = c.get_int("gossip.consensus_every"),
                .async = c.get_string("gossip.mode") == "async", .timeout = timeout};
    if (c.get_string("gossip.topology") == "torus") o.gossip.torus_rows = static_cast<int>(c.get_int("gossip.torus_rows"));
    if (o.gossip.async) o.gossip.max_staleness = c.get_int("gossip.max_staleness");
  } else if (s == "hybrid") {
    o.hybrid = {.wait = milliseconds(c.get_float("hybrid.timeout_ms")),
                .late = parallel::hybrid::parse_late(c.get_string("hybrid.late")),
                .max_lag = c.get_int("hybrid.max_lag"),
                .catch_up = parallel::hybrid::parse_catch_up(c.get_string("hybrid.catch_up")),
                .timeout = timeout,
                .via = parallel::hybrid::parse_via(c.get_string("hybrid.via"))};
    if (o.hybrid.late == parallel::hybrid::Late::stale) {
      o.hybrid.stale_weight = c.get_float("hybrid.stale_weight");
      o.hybrid.max_staleness = c.get_int("hybrid.max_staleness");
    }
  }
  return o;
}

}  // namespace braid::train
