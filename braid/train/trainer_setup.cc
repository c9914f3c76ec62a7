#include "braid/train/trainer_setup.h"

#include <algorithm>
#include <map>
#include <thread>

#include "braid/base/float_env.h"
#include "braid/base/thread_pool.h"
#include "braid/data/csv.h"
#include "braid/data/fashion_mnist.h"
#include "braid/data/libsvm.h"
#include "braid/data/synthetic.h"
#include "braid/data/text.h"
#include "braid/parallel/plan_factory.h"
#include "braid/tensor/backend.h"
#include "braid/tensor/cpu/autotune.h"
#include "braid/text/token_dataset.h"
#include "braid/train/config_data.h"
#include "braid/train/device_plans.h"
#include "braid/train/ensemble.h"
#include "braid/train/flops.h"
#include "braid/train/models.h"
#include "braid/train/moe_run.h"
#include "braid/train/pretrained.h"
#include "braid/train/replica_run.h"

namespace braid::train {

namespace {

// The first or last `count` examples of another dataset (held-out splits of
// single-file datasets).
class Slice final : public data::Dataset {
 public:
  Slice(std::shared_ptr<const data::Dataset> base, int64_t begin, int64_t count)
      : base_(std::move(base)), begin_(begin), count_(count) {}
  int64_t size() const override { return count_; }
  data::ExampleSpec spec() const override { return base_->spec(); }
  void read(int64_t index, std::byte* input, std::byte* target) const override {
    if (index < 0 || index >= count_) fail<IndexError>("dataset slice: index {} outside [0, {})", index, count_);
    base_->read(begin_ + index, input, target);
  }

 private:
  std::shared_ptr<const data::Dataset> base_;
  int64_t begin_, count_;
};

struct Datasets {
  std::shared_ptr<const data::Dataset> train, test;
  int64_t classes = 0;
};

// Single-file datasets keep their last 10% as the test split.
Datasets split(std::shared_ptr<const data::Dataset> all, int64_t classes) {
  const int64_t n = all->size(), test = n / 10;
  if (n < 2) fail<ConfigError>("the dataset has {} examples; training needs at least 2", n);
  return {std::make_shared<Slice>(all, 0, n - test), test > 0 ? std::make_shared<Slice>(all, n - test, test) : nullptr,
          classes};
}

Datasets load_datasets(const Config& c) {
  const std::string& name = c.get_string("data.name");
  if (name == "synthetic") {
    return split(std::make_shared<data::SyntheticImages>(synthetic_options(c)), c.get_int("data.classes"));
  }
  const std::string& path = c.get_string("data.path");
  if (name == "fashion_mnist") {
    const bool norm = c.get_bool("data.normalize");
    return {std::make_shared<data::FashionMnist>(data::FashionMnistOptions{.dir = path, .train = true, .normalize = norm}),
            std::make_shared<data::FashionMnist>(data::FashionMnistOptions{.dir = path, .train = false, .normalize = norm}),
            10};
  }
  if (name == "text") {
    // data.stride 0: windows side by side (as braid inspect data opens them).
    const int64_t context = c.get_int("model.context"), stride = c.get_int("data.stride");
    auto text = std::make_shared<data::CharTextDataset>(
        path, data::TextOptions{.context = context, .stride = stride > 0 ? stride : context});
    return split(text, text->vocab_size());
  }
  if (name == "tokens") {
    // data.path: a glob of shards (braid tokenize encode); the vocabulary is the shards'.
    const int64_t context = c.get_int("model.context"), stride = c.get_int("data.stride");
    auto tokens = std::make_shared<text::TokenDataset>(
        path, text::WindowOptions{.context = static_cast<uint64_t>(context), .stride = static_cast<uint64_t>(stride)});
    return split(tokens, tokens->vocab_size());
  }
  if (name == "csv" || name == "libsvm") {
    std::shared_ptr<const data::Dataset> all;
    int64_t classes = 0;
    if (name == "csv") {
      auto d = std::make_shared<data::CsvDataset>(path);
      all = d;
      for (int64_t i = 0; i < d->size(); ++i) classes = std::max(classes, d->get(i).target.to_vector<int64_t>()[0] + 1);
    } else {
      auto d = std::make_shared<data::LibsvmDataset>(path, data::LibsvmOptions{.class_targets = true});
      classes = static_cast<int64_t>(d->classes().size());
      all = d;
    }
    return split(all, classes);
  }
  fail<ConfigError>("data.name = {} is not supported by braid train", name);
}

// The inputs of the first `n` examples as one batch (to time layers on).
Tensor sample_inputs(const data::Dataset& d, int64_t n) {
  const data::ExampleSpec spec = d.spec();
  n = std::min(n, d.size());
  Shape shape{n};
  shape.insert(shape.end(), spec.input_shape.begin(), spec.input_shape.end());
  Tensor x = Tensor::empty(shape, spec.input_dtype);
  std::vector<std::byte> target(spec.target_bytes());
  for (int64_t i = 0; i < n; ++i) {
    d.read(i, static_cast<std::byte*>(x.raw_data()) + static_cast<size_t>(i) * spec.input_bytes(), target.data());
  }
  return x;
}

}  // namespace

DType train_precision(const Config& config) {
  const std::string& p = config.get_string("train.precision");
  return p == "bf16" ? DType::bf16 : p == "f16" ? DType::f16 : DType::f32;
}

Device train_device(const Config& config, int local_rank) {
  const std::string& text = config.get_string("train.device");
  Device device;
  try {
    device = parse_device(text);
    if (device == Device::meta) fail<ValueError>("meta tensors have no values to train");
    // A bare "cuda" spreads the ranks of one host over its GPUs; backend()
    // says why there is none (no CUDA build, no GPU visible).
    if (text == "cuda") device = Device::cuda(local_rank % std::max(1, backend(device).device_count()));
    if (!device.is_cpu()) backend(device);
  } catch (const ValueError& e) {
    fail<ConfigError>("train.device = {}: {}", text, e.what());
  }
  return device;
}

void require_cpu_device(const Config& config, std::string_view what, std::string_view why) {
  const std::string& text = config.get_string("train.device");
  bool cpu = false;
  try {
    cpu = parse_device(text).is_cpu();
  } catch (const ValueError&) {
  }
  if (!cpu) fail<ConfigError>("train.device = {} has no effect on {}: {}; use train.device = cpu", text, what, why);
}

ModelAndBatch model_and_batch(const Config& c) {
  const Datasets ds = load_datasets(c);
  ModelAndBatch m;
  m.example = ds.train->spec();
  m.train = ds.train;
  Generator init_gen(static_cast<uint64_t>(c.get_int("train.seed")), /*stream=*/0);
  m.model = build_model(c, {.input_shape = m.example.input_shape, .classes = ds.classes}, init_gen);
  m.batch = c.get_int("train.batch_size");
  m.loss = nn::cross_entropy_loss;
  return m;
}

namespace {

// Threads past this many per core only time-share the cores, and the OS runs
// out long before the key's range does: train.threads = 100000 died inside
// OpenMP (SIGSEGV, no message) creating its stacks.
constexpr int64_t kThreadsPerCore = 8;

// The keys that start threads, bounded by this machine's cores.
void check_thread_counts(const Config& c) {
  const int64_t cores = std::max<int64_t>({1, available_cores(), std::thread::hardware_concurrency()});
  for (const char* key : {"train.threads", "data.workers"}) {
    if (const int64_t n = c.get_int(key); n > kThreadsPerCore * cores) {
      fail<ConfigError>("{} = {} is more threads than this machine can run usefully: at most {} ({} per core, {} "
                        "cores)", key, n, kThreadsPerCore * cores, kThreadsPerCore, cores);
    }
  }
}

// Evaluation batches: at least 256 (evaluation keeps no activations), at most
// the set (a larger one changes no figure, only what memory it reserves).
int64_t eval_batch(int64_t batch, int64_t examples) {
  return std::min(std::max<int64_t>(batch, 256), std::max<int64_t>(examples, 1));
}

}  // namespace

TrainingRun make_training_run(const Config& run_config, RunOptions options) {
  const comm::Env env = comm::read_env();
  // An ensemble member's weights, data order and checkpoints are its own
  // from the start: its seed and folder are set before anything is built.
  const bool ensemble = run_config.get_string("parallel.strategy") == "ensemble";
  if (!ensemble && run_config.get_int("distill.epochs") > 0) {
    fail<ConfigError>("distill.epochs = {} distils an ensemble's members into a student: it needs "
                      "parallel.strategy = ensemble", run_config.get_int("distill.epochs"));
  }
  const Config c = ensemble ? member_config(run_config, options.group ? options.group->comm().rank() : env.rank)
                            : run_config;
  // train.threads = 0: the cores this process may use, shared with the other
  // ranks on this host (LOCAL_WORLD_SIZE), so ranks never oversubscribe them.
  check_thread_counts(c);
  const int64_t threads = c.get_int("train.threads");
  // Parameter servers mostly wait; the workers get the cores.
  const int local_ranks =
      c.get_string("parallel.strategy") == "none" ? 1 : std::max(1, env.local_size - env.ps_servers);
  set_num_threads(threads > 0 ? static_cast<int>(threads) : std::max(1, available_cores() / local_ranks));
  cpu::set_deterministic_kernels(c.get_bool("train.deterministic"));
  set_flush_denormals(c.get_bool("train.flush_denormals"));
  const uint64_t seed = static_cast<uint64_t>(c.get_int("train.seed"));
  const Device device = train_device(c, env.local_rank);  // before the data: a bad device fails fast
  Datasets ds = load_datasets(c);
  std::shared_ptr<const data::Dataset> validation;
  if (const int64_t held = c.get_int("data.validation"); held > 0) {
    const int64_t n = ds.train->size();
    if (held >= n) fail<ConfigError>("data.validation = {} leaves nothing to train on ({} training examples)", held, n);
    validation = std::make_shared<Slice>(ds.train, n - held, held);
    ds.train = std::make_shared<Slice>(ds.train, 0, n - held);
  }
  TrainingRun run;
  run.train_data = ds.train;
  if (options.train_data) ds.train = options.train_data(ds.train);

  run.generator = std::make_shared<Generator>(seed, /*stream=*/1);
  const data::ExampleSpec spec = ds.train->spec();
  Generator init_gen(seed, /*stream=*/0);
  const ModelInfo info{.input_shape = spec.input_shape, .classes = ds.classes,
                       .dropout_generator = run.generator.get()};
  run.model = options.build_model ? options.build_model(info, init_gen) : build_model(c, info, init_gen);
  if (!run.model) fail<ValueError>("the run's model builder returned no model");
  // The weights of a braid checkpoint or a Hugging Face folder (train/pretrained.h), before a plan shards them.
  if (const std::string& init = c.get_string("train.init"); !init.empty()) init_model(*run.model, init, c, info);
  // Sequence models (next-token windows): tokens/s, MFU and perplexity; the
  // FLOPs per token are the whole model's, before a plan shards it.
  const std::string& data_name = c.get_string("data.name");
  const bool sequence = (data_name == "text" || data_name == "tokens") && spec.input_shape.size() == 1;
  const int64_t tokens_per_example = sequence ? spec.input_shape[0] : 0;
  const double flops_per_token = sequence ? model_token_flops(c, *run.model, tokens_per_example).per_token() : 0.0;
  // Initialised on the host (the same weights on every device), then moved
  // before the plan takes hold of the parameters and the optimizer makes its
  // state beside them.
  run.model->to(device);

  const int64_t batch = c.get_int("train.batch_size");
  const int workers = static_cast<int>(c.get_int("data.workers"));
  // Distributed: join the job and build the plan first, so every rank knows
  // its replica (the data shard it reads) and its part of the model.
  std::string strategy = c.get_string("parallel.strategy");
  Duration timeout = parallel::ProcessGroupOptions{}.timeout;  // nothing waits without a group
  // parallel.fault_tolerance = replica: no fixed group; each replica trains a
  // one-process plan and averages its gradient over the replica group.
  const bool replicas = c.get_string("parallel.fault_tolerance") == "replica" && strategy != "none";
  ReplicaJoin rj;
  if (replicas) {
    timeout = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(c.get_float("parallel.timeout_s")));
    check_replica_plan(c, plan_options(c, timeout, strategy));
    rj = join_replica_group(c, timeout);
    strategy = "none";
  } else if (strategy != "none") {
    const parallel::ProcessGroupOptions group_options = process_group_options(c);
    timeout = group_options.timeout;
    run.group = options.group ? std::move(options.group) : parallel::ProcessGroup::join(group_options);
    // auto: a job started with parameter servers trains through them.
    if (strategy == "auto" && run.group->env().ps_servers > 0) strategy = "ps";
    // How collectives move device buffers (NCCL or staged through the host),
    // agreed by every rank before the plan's first collective.
    if (!device.is_cpu()) comm::choose_device_comm(run.group->comm(), device, device_comm_option(c, device));
  }
  parallel::PlanOptions po = plan_options(c, timeout, strategy);
  if (po.mesh.context > 1) {
    // Each context rank holds T / C tokens of every sequence: 2 of 2C equal
    // chunks on the ring (zig-zag), 1 of C under Ulysses.
    const int64_t chunks = po.context_mode == "ring" ? 2 * po.mesh.context : po.mesh.context;
    const int64_t length = spec.input_shape.size() == 1 ? spec.input_shape[0] : 0;
    if (length < chunks || length % chunks != 0) {
      fail<ConfigError>("parallel.context = {} with parallel.context_mode = {} cuts each sequence into {} equal chunks; "
                        "model.context = {} tokens do not divide into them", po.mesh.context, po.context_mode, chunks,
                        length);
    }
  }
  if (po.sequence_parallel) {
    const int64_t length = spec.input_shape.size() == 1 ? spec.input_shape[0] : 0;
    if (length < po.mesh.tensor || length % po.mesh.tensor != 0) {
      fail<ConfigError>("parallel.sequence_parallel cuts each sequence into parallel.tensor = {} equal segments; "
                        "model.context = {} tokens do not divide into them", po.mesh.tensor, length);
    }
  }
  if (po.balance == "time") po.sample_input = sample_inputs(*ds.train, c.get_int("train.batch_size")).to(device);
  if (strategy != "none") {
    const bool on_servers = (po.strategy == "easgd" && po.easgd.async) || (po.strategy == "admm" && po.admm.async);
    if (on_servers) po.servers = run.group->env().ps_servers;
    const int servers = po.strategy == "ps" ? run.group->env().ps_servers : 0;
    if (po.strategy == "ps" && servers == 0) {
      fail<ConfigError>("parallel.strategy = ps needs parameter servers: start the job with "
                        "braid launch --servers S --workers W -- braid train ...");
    }
    if (po.strategy == "ps") po.ps = ps_options(c, servers, timeout);
    if (po.strategy == "ensemble") {
      po.ensemble.store = run.group->store();  // the members' watch (null under mpi)
      po.ensemble.attempt = run.group->env().restart;
    }
    if (po.strategy != "ps" && po.strategy != "auto" && !on_servers && run.group->env().ps_servers > 0) {
      fail<ConfigError>("parallel.strategy = {} combines the workers among themselves; this job was started with {} "
                        "parameter servers (start it with braid launch -n N, or use parallel.strategy = ps, or "
                        "easgd.mode / admm.mode = async)",
                        po.strategy, run.group->env().ps_servers);
    }
  } else if (po.mesh.tensor > 1 || po.mesh.pipeline > 1 || po.mesh.data > 1 || po.mesh.context > 1) {
    fail<ConfigError>("parallel.strategy = none trains one process; parallel.data, parallel.tensor, "
                      "parallel.pipeline and parallel.context need a job (braid launch, mpirun or srun) and strategy "
                      "auto or allreduce");
  }
  check_expert_parallel(c, po);
  parallel::PlannedModel planned =
      parallel::make_plan(po, run.group ? run.group->comm() : comm::Communicator(),
                          run.group ? run.group->transport() : nullptr, run.model,
                          options.loss ? options.loss : nn::LossFn(nn::cross_entropy_loss));
  run.model = planned.model;
  std::shared_ptr<parallel::Plan> plan = std::move(planned.plan);
  check_plan_on_device(*plan, c, device);
  const int rank = rj.group ? rj.slot : plan->data_rank(), world = rj.group ? rj.slots : plan->data_world();
  run.leader = rj.group ? rj.slot == 0 : plan->is_leader();
  // The same loader `braid inspect data` shows (train/config_data.h).
  // An ensemble's shards are cut by the run's own seed, alike on every
  // member, so they stay disjoint; a member that reads the whole set visits
  // it in its own seed's order.
  const Config& data_config = ensemble && world > 1 ? run_config : c;
  if (ensemble && world > 1 && c.get_string("train.batch_schedule") == "noise") {
    // The trainer measures the noise of a step's gradient as averaged over
    // data_world() replicas; a shard member's gradient is its own.
    fail<ConfigError>("train.batch_schedule = noise with ensemble.data = shard: a member's gradients are its own, "
                      "not averaged over the {} shards (use ensemble.data = whole or train.batch_schedule = epoch)",
                      world);
  }
  run.train_loader = make_train_loader(data_config, ds.train, {.rank = rank, .world = world});
  run.train_examples = ds.train->size();
  // train.accumulate: the trainer takes that many loader batches per step,
  // except under a pipeline, whose micro-batches are its accumulation:
  // plan_options multiplied them, and the loader's batch is the step's.
  const int64_t accumulate = c.get_int("train.accumulate");
  const bool pipeline_accumulates = po.mesh.pipeline > 1 && accumulate > 1;
  if (pipeline_accumulates) {
    if (c.get_string("train.batch_schedule") != "none") {
      fail<ConfigError>("train.accumulate = {} with train.batch_schedule = {} under parallel.pipeline = {}: a pipeline "
                        "accumulates through its micro-batches, which a growing batch would resize (use one of them)",
                        accumulate, c.get_string("train.batch_schedule"), po.mesh.pipeline);
    }
    run.train_loader->set_batch_size(batch * accumulate);
  }

  // Replicas that hold the same model evaluate a share of the test set each.
  const bool test_shares = plan->evaluates_shares();
  if (ds.test) {
    // A sequence model's outputs are [batch, context, vocabulary]: its
    // evaluation batch stays the training one.
    run.test_loader = std::make_shared<data::Loader>(
        ds.test,
        std::make_shared<data::SequentialSampler>(ds.test->size(), test_shares ? rank : 0, test_shares ? world : 1),
        data::LoaderOptions{.batch_size = sequence ? std::min(batch, ds.test->size()) : eval_batch(batch, ds.test->size()),
                            .workers = workers});
    run.test_examples = ds.test->size();
  }
  if (validation) {
    run.validation_loader = std::make_shared<data::Loader>(
        validation, std::make_shared<data::SequentialSampler>(validation->size()),
        data::LoaderOptions{.batch_size = eval_batch(batch, validation->size()), .workers = workers});
  }

  // Weight decay's filter judges a ZeRO slice by its whole parameter's dimensions.
  std::map<std::string, int64_t> ndim_of;
  for (const auto& [name, t] : run.model->named_parameters()) ndim_of[name] = t.ndim();
  std::vector<int64_t> ndims;
  for (const std::string& name : plan->optimizer_parameter_names(*run.model)) ndims.push_back(ndim_of.at(name));
  std::unique_ptr<optim::Optimizer> opt = make_optimizer(c, plan->optimizer_parameters(*run.model), ndims);
  const int64_t epochs = c.get_int("train.epochs"), max_steps = c.get_int("train.max_steps");
  const int64_t per_step = pipeline_accumulates ? 1 : accumulate;  // loader batches
  const int64_t steps_per_epoch = (run.train_loader->batches_per_epoch() + per_step - 1) / per_step;
  int64_t total = epochs * steps_per_epoch;
  if (max_steps > 0) total = std::min(total, max_steps);
  auto schedule = optim::make_schedule(schedule_options(c, total));
  TrainerOptions to{.epochs = epochs, .max_steps = max_steps, .job_budget = c.get_string("train.budget") == "job",
                    .grad_clip = c.get_float("train.grad_clip"),
                    .accumulate = pipeline_accumulates ? 1 : accumulate,
                    .log_every = c.get_int("train.log_every"), .eval_every = c.get_int("train.eval_every"),
                    .eval_steps = c.get_int("train.eval_steps"), .test_shares = test_shares,
                    .eval_batches = c.get_int("train.eval_batches"), .tokens_per_example = tokens_per_example,
                    .flops_per_token = flops_per_token,
                    .peak_flops = sequence ? 1e12 * c.get_float("train.peak_tflops") : 0.0,
                    .checkpoint_every = c.get_int("train.checkpoint_every"),
                    .keep_checkpoints = static_cast<int>(c.get_int("train.keep_checkpoints")),
                    .sharded_checkpoints = c.get_string("train.checkpoint_format") == "sharded",
                    .checkpoint_async = c.get_string("train.checkpoint_format") != "sharded" || c.get_bool("train.checkpoint_async"),
                    .checkpoints = !rj.group || rj.slot == 0,  // replicas: slot 0 writes (the replicas are equal)
                    .out_dir = c.get_string("train.out_dir"), .resume = parse_resume(c.get_string("train.resume")),
                    .config = c.to_json(), .generator = run.generator, .seed = seed,
                    // An ensemble member's gradients are its own, whatever data it reads.
                    .batch_schedule = make_batch_schedule(c, ensemble ? 1 : world),
                    .straggler_rank = static_cast<int>(c.get_int("train.straggler_rank")),
                    .straggler_ms = c.get_int("train.straggler_rank") >= 0 ? c.get_float("train.straggler_ms") : 0.0,
                    .straggler = {.every = c.get_int("train.straggler_every"),
                                  .ratio = c.get_float("train.straggler_ratio"),
                                  .windows = static_cast<int>(c.get_int("train.straggler_windows"))},
                    .trace = c.get_bool("train.trace"), .precision = train_precision(c)};
  run.trainer = std::make_unique<Trainer>(run.model, std::move(opt), std::move(schedule), planned.loss,
                                          run.train_loader, run.test_loader, std::move(to));
  run.trainer->set_plan(std::move(plan), nn::cross_entropy_loss);
  if (rj.group) run.trainer->set_replicas(rj.group);
  // Mixture-of-experts layers: each micro-batch's auxiliary losses weigh as its loss does; router statistics.
  if (auto layers = moe_layers(*run.model); !layers.empty()) {
    if (po.microbatch_max > 0) {
      fail<ConfigError>("parallel.microbatch_max with model.moe.experts: the auxiliary losses are weighted per "
                        "micro-batch, and this splits a step into a varying number of them");
    }
    set_moe_loss_scale(*run.model, int64_t{po.microbatches} * (pipeline_accumulates ? 1 : accumulate));
    if (c.get_string("model.moe.balance") == "bias") {
      run.trainer->add_callback(std::make_shared<MoeBalanceBias>(layers, run.trainer->plan().mesh().data_context_group(),
                                                                 po.strategy));
    }
    if (run.leader) {
      run.trainer->add_callback(std::make_shared<MoeMetrics>(std::move(layers), c.get_string("train.out_dir")));
    }
  }
  run.out_dir = c.get_string("train.out_dir");
  run.progress = c.get_string("train.progress");
  return run;
}

}  // namespace braid::train
