// [train]: the loop, its outputs and its resources.
#include "braid/train/schema.h"

namespace braid::train {

void add_train_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "train.epochs", .type = T::Int, .default_value = int64_t{5}, .help = "passes over the training set",
         .min = 1, .max = 1e9});  // times the batches of an epoch, it must fit a step count
  s.add({.name = "train.batch_size", .type = T::Int, .default_value = int64_t{64},
         .help = "examples per micro-batch (per rank when distributed); an optimizer step takes "
                 "train.accumulate of them", .min = 1});
  s.add({.name = "train.accumulate", .type = T::Int, .default_value = int64_t{1},
         .help = "gradient accumulation: micro-batches of train.batch_size per optimizer step, whose gradients "
                 "add up to one batch's of train.batch_size x train.accumulate rows; data-parallel plans combine "
                 "gradients once per step; a pipeline runs them as parallel.microbatches x train.accumulate "
                 "micro-batches", .min = 1, .max = 1e6});
  s.add({.name = "train.batch_schedule", .type = T::String, .default_value = std::string("none"),
         .help = "grow the batch between epochs: none; epoch = x train.batch_growth every train.batch_every epochs; "
                 "noise = x train.batch_growth at an epoch start when the grown global batch stays within the "
                 "gradient noise scale measured since the last growth (the learning rate follows by train.lr_scaling)",
         .choices = {"none", "epoch", "noise"}});
  s.add({.name = "train.batch_growth", .type = T::Float, .default_value = 2.0,
         .help = "batch-size schedules: factor of each growth", .min = 1.0});
  s.add({.name = "train.batch_every", .type = T::Int, .default_value = int64_t{1},
         .help = "batch_schedule = epoch: epochs between growths", .min = 1});
  s.add({.name = "train.batch_max", .type = T::Int, .default_value = int64_t{0},
         .help = "batch-size schedules: largest batch per rank; 0 = no limit (parallel.microbatch_max bounds what "
                 "runs at once)", .min = 0});
  s.add({.name = "train.lr_scaling", .type = T::String, .default_value = std::string("linear"),
         .help = "batch-size schedules: the learning rate times (batch / train.batch_size) (linear), its square "
                 "root (sqrt), or unchanged (none)",
         .choices = {"none", "linear", "sqrt"}});
  s.add({.name = "train.noise_window", .type = T::Int, .default_value = int64_t{8},
         .help = "batch_schedule = noise: steps whose mean gradient is compared with their own to estimate the noise "
                 "scale", .min = 2});
  s.add({.name = "train.out_dir", .type = T::String, .default_value = std::string("runs/default"),
         .help = "folder for metrics (metrics.jsonl, TensorBoard events) and checkpoints", .env = "BRAID_OUT_DIR"});
  s.add({.name = "train.seed", .type = T::Int, .default_value = int64_t{0},
         .help = "seed of every random stream (init, shuffling, augmentation, dropout)", .min = 0,
         .env = "BRAID_SEED"});
  s.add({.name = "train.threads", .type = T::Int, .default_value = int64_t{0},
         .help = "intra-op threads; 0 = all cores the process may use; at most 8 per core of the machine (checked "
                 "when training starts)", .min = 0, .max = 4096, .env = "BRAID_THREADS"});
  s.add({.name = "train.deterministic", .type = T::Bool, .default_value = false,
         .help = "kernels that repeat bit for bit: the CPU GEMM and convolution run one fixed implementation instead "
                 "of the fastest measured one (whose choice can differ from run to run)",
         .env = "BRAID_DETERMINISTIC"});
  s.add({.name = "train.flush_denormals", .type = T::Bool, .default_value = false,
         .help = "flush subnormal floats to zero (x86 FTZ and DAZ) on every compute thread: Intel cores compute "
                 "them several times slower; values below 1.2e-38 become 0",
         .env = "BRAID_FLUSH_DENORMALS"});
  s.add({.name = "train.log_every", .type = T::Int, .default_value = int64_t{100},
         .help = "steps between metric records and progress lines", .min = 1});
  s.add({.name = "train.eval_every", .type = T::Int, .default_value = int64_t{1},
         .help = "epochs between evaluations on the test set; 0 = never", .min = 0});
  s.add({.name = "train.eval_steps", .type = T::Int, .default_value = int64_t{0},
         .help = "also evaluate every N steps within epochs (time-to-accuracy at a finer cadence); plans that train "
                 "replicas apart evaluate rank 0's replica there; 0 = only at epoch ends", .min = 0});
  s.add({.name = "train.eval_batches", .type = T::Int, .default_value = int64_t{0},
         .help = "batches of the test set each evaluation reads: the first N, the same each time (a language "
                 "model's held-out tokens can be far too many to read every few hundred steps); 0 = the whole set",
         .min = 0});
  s.add({.name = "train.peak_tflops", .type = T::Float, .default_value = 0.0,
         .help = "sequence models (data.name = text or tokens): the peak TFLOP/s of one device in the run's "
                 "precision that MFU divides by (a GPU's datasheet figure); 0 = measured by a quarter-second "
                 "matrix product on the device when training starts", .min = 0.0});
  s.add({.name = "train.checkpoint_every", .type = T::Int, .default_value = int64_t{0},
         .help = "steps between checkpoints; 0 = at the end of each epoch", .min = 0});
  s.add({.name = "train.keep_checkpoints", .type = T::Int, .default_value = int64_t{3},
         .help = "complete checkpoints kept in out_dir; older ones are deleted after each save (never the one "
                 "being written or the newest complete one)", .min = 1});
  s.add({.name = "train.checkpoint_format", .type = T::String, .default_value = std::string("whole"),
         .help = "whole = the whole model in one file per tensor/pipeline shard, gathered on data rank 0; sharded = "
                 "every rank writes its own shard (ZeRO pieces, tensor and pipeline slices, a replica's share) in "
                 "parallel, and world rank 0 a manifest once all are committed (needs replicas that stay equal: "
                 "allreduce or ZeRO)", .choices = {"whole", "sharded"}});
  s.add({.name = "train.checkpoint_async", .type = T::Bool, .default_value = true,
         .help = "checkpoint_format = sharded: write each save from a background thread while training goes on, "
                 "the step paying only for a copy into a staging buffer; false = write it before the next step"});
  s.add({.name = "train.resume", .type = T::String, .default_value = std::string("auto"),
         .help = "auto = continue from the newest usable checkpoint in out_dir (a group restarted by braid launch "
                 "--max-restarts too), else start from scratch, saying why when some are unusable; always = the "
                 "same, but fail naming every checkpoint and why it is unusable when none is; never = start from "
                 "scratch, refused while out_dir holds checkpoints it would overwrite (true and false, the values "
                 "before, are refused: true is auto or always, false is never)",
         .choices = {"auto", "never", "always"}});
  s.add({.name = "train.init", .type = T::String, .default_value = std::string(""),
         .help = "start from these weights instead of random ones: a Hugging Face folder (config.json + "
                 "model.safetensors, GPT-2 or LLaMA; model.name = gpt with matching model.* keys) or a braid "
                 "checkpoint (a run's out_dir or its ckpt-N.safetensors); a checkpoint in out_dir to resume from "
                 "takes precedence; \"\" = random"});
  s.add({.name = "train.max_steps", .type = T::Int, .default_value = int64_t{0},
         .help = "stop after this many optimizer steps; 0 = no limit", .min = 0});
  s.add({.name = "train.budget", .type = T::String, .default_value = std::string("replica"),
         .help = "whose steps train.epochs and train.max_steps count: replica = each replica its own; job = all "
                 "replicas' together (W times one replica's), so a fast replica goes on past its epochs while a slow "
                 "one is behind (replicas on parameter servers: ps, easgd/admm async)",
         .choices = {"replica", "job"}});
  s.add({.name = "train.grad_clip", .type = T::Float, .default_value = 0.0,
         .help = "clip the global gradient L2 norm to this; 0 = off", .min = 0.0});
  s.add({.name = "train.progress", .type = T::String, .default_value = std::string("auto"),
         .help = "progress display: bar (redrawn line), lines (periodic plain lines), off; auto = bar on a terminal",
         .choices = {"auto", "bar", "lines", "off"}, .env = "BRAID_PROGRESS"});
  s.add({.name = "train.device", .type = T::String, .default_value = std::string("cpu"),
         .help = "where the model, its optimizer state and each batch live: cpu, cuda or cuda:N; a bare cuda "
                 "picks GPU (local rank mod visible GPUs), so ranks on one host spread over its GPUs; checkpoints "
                 "hold host tensors and load onto any device"});
  s.add({.name = "train.precision", .type = T::String, .default_value = std::string("f32"),
         .help = "bf16: linear, matmul and conv run bf16 products with f32 results (as torch.autocast); "
                 "weights, gradients, optimizer and every other op stay f32; f16 (CUDA only): the same in f16, "
                 "with dynamic loss scaling (as torch.cuda.amp.GradScaler)",
         .choices = {"f32", "bf16", "f16"}, .env = "BRAID_PRECISION"});
  s.add({.name = "train.straggler_rank", .type = T::Int, .default_value = int64_t{-1},
         .help = "benchmarks: the worker (data rank) that sleeps train.straggler_ms every step; -1: none"});
  s.add({.name = "train.straggler_ms", .type = T::Float, .default_value = 0.0,
         .help = "benchmarks: milliseconds the straggler sleeps per step", .min = 0.0,
         .max = 3.2e10});  // a year; durations are nanoseconds in an int64
  s.add({.name = "train.straggler_every", .type = T::Int, .default_value = int64_t{50},
         .help = "steps between exchanges of every rank's own work per step (step time minus the wait for "
                 "gradients), to name persistently slow ranks; 0 = off", .min = 0});
  s.add({.name = "train.straggler_ratio", .type = T::Float, .default_value = 1.5,
         .help = "a rank whose own work per step is this many times the median of the others' is slow", .min = 1.0});
  s.add({.name = "train.straggler_windows", .type = T::Int, .default_value = int64_t{2},
         .help = "consecutive slow exchanges before a rank is named a straggler (logged, metrics.jsonl, launcher "
                 "summary)", .min = 1});
  s.add({.name = "train.trace", .type = T::Bool, .default_value = false,
         .help = "record a timeline of every rank (step phases, data waits, collectives, parameter-server "
                 "exchanges, waits on peers) to out_dir/trace/rank-R.json, merged into out_dir/trace.json",
         .env = "BRAID_TRACE"});
}

}  // namespace braid::train
