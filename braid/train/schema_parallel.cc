// [parallel]: how training is distributed.
#include "braid/comm/transport/tcp.h"
#include "braid/train/schema.h"

namespace braid::train {

void add_parallel_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "parallel.strategy", .type = T::String, .default_value = std::string("auto"),
         .help = "how replicas on the data axis combine: auto = ps when the job has parameter servers, "
                 "allreduce when it has more than one replica, else nothing; none = one process, no job; allreduce = synchronous data parallelism "
                 "(gradients averaged in buckets that overlap backward); zero = data parallelism that splits the model "
                 "state over the replicas (ZeRO, parallel.zero_stage); ps = parameter servers (ps.* keys; "
                 "start with braid launch --servers S --workers W); skeleton = replicas train locally, a skeleton of "
                 "the most important entries averaged every step, the rest each trained by one random owner and "
                 "merged every parallel.skeleton_every steps; local_sgd = local steps, parameters averaged every "
                 "local_sgd.period steps; bmuf = local_sgd with block momentum (bmuf.*); easgd = elastic averaging "
                 "with a center variable (easgd.*); admm = consensus ADMM (admm.*); gossip = decentralised SGD "
                 "(D-PSGD): each replica averages with its neighbours in gossip.topology every step, no global "
                 "synchronisation; hybrid = synchronous steps that wait for the replicas' gradients only "
                 "hybrid.timeout_ms, late ones dropped or applied stale; ensemble = every rank trains its "
                 "own model (seed train.seed + rank) without communicating, evaluated as the average of the members' "
                 "probabilities and optionally distilled into one student (ensemble.*, distill.* keys)",
         .choices = {"auto", "none", "allreduce", "zero", "ps", "skeleton", "local_sgd", "bmuf", "easgd", "admm",
                     "gossip", "hybrid", "ensemble"}});
  s.add({.name = "parallel.skeleton_fraction", .type = T::Float, .default_value = 0.1,
         .help = "strategy skeleton: fraction of the model's entries in the skeleton (top by |w| + |grad w|), "
                 "averaged over the replicas every step; 1 = plain model averaging",
         .min = 0.0, .max = 1.0});  // 0 itself is refused by the partition
  s.add({.name = "parallel.skeleton_every", .type = T::Int, .default_value = int64_t{20},
         .help = "strategy skeleton: steps between merges, where every entry is taken from its owner and the "
                 "skeleton and owners are chosen again",
         .min = 1.0});
  s.add({.name = "parallel.zero_stage", .type = T::Int, .default_value = int64_t{1},
         .help = "strategy zero: 1 = optimizer state split over the data axis; 2 = also gradients; 3 = also "
                 "parameters (each layer gathered around its forward and backward)",
         .min = 1.0, .max = 3.0});
  s.add({.name = "parallel.zero_prefetch", .type = T::Bool, .default_value = true,
         .help = "zero stage 3: gather the next layer's parameters while this one computes"});
  s.add({.name = "parallel.data", .type = T::Int, .default_value = int64_t{0},
         .help = "data-parallel degree (replicas); 0: world / (tensor x pipeline x context)", .min = 0.0});
  s.add({.name = "parallel.tensor", .type = T::Int, .default_value = int64_t{1},
         .help = "tensor-parallel degree: layers split Megatron-style over this many neighbouring ranks", .min = 1.0});
  s.add({.name = "parallel.expert", .type = T::Int, .default_value = int64_t{1},
         .help = "expert-parallel degree: groups of this many neighbouring data ranks share out each MoE layer's "
                 "experts (model.moe.experts / this per rank; it divides the data degree; docs/moe.md)", .min = 1.0});
  s.add({.name = "parallel.pipeline", .type = T::Int, .default_value = int64_t{1},
         .help = "pipeline-parallel degree: the model cut into this many stages", .min = 1.0});
  s.add({.name = "parallel.context", .type = T::Int, .default_value = int64_t{1},
         .help = "context-parallel degree: each sequence split over this many ranks, attention spanning them "
                 "(model.name = gpt; docs/context_parallel.md)", .min = 1.0});
  s.add({.name = "parallel.context_mode", .type = T::String, .default_value = std::string("ring"),
         .help = "parallel.context > 1: ring = each rank holds 2 of 2C zig-zag chunks of the sequence, keys and "
                 "values travel around the ring overlapped with each block's attention (model.context divisible by "
                 "2C); ulysses = all-to-all to whole sequences of H / C heads and back (model.n_heads and "
                 "model.kv_heads divisible by C)",
         .choices = {"ring", "ulysses"}});
  s.add({.name = "parallel.sequence_parallel", .type = T::Bool, .default_value = false,
         .help = "with parallel.tensor > 1: layer norms, dropout and residuals run on T / tensor tokens of each "
                 "sequence, the all-reduces of tensor parallelism become all-gathers and reduce-scatters along the "
                 "sequence (model.name = gpt; model.context divisible by parallel.tensor; docs/tensor_parallel.md)"});
  s.add({.name = "parallel.tp_overlap", .type = T::Bool, .default_value = true,
         .help = "with parallel.tensor > 1: cut each GEMM beside a tensor-parallel collective into chunks and run "
                 "each chunk's collective on a communication thread while the next chunk multiplies (f32); false: "
                 "the blocking collectives, for comparison"});
  s.add({.name = "parallel.schedule", .type = T::String, .default_value = std::string("1f1b"),
         .help = "pipeline schedule: gpipe = all forwards then all backwards; 1f1b = one forward one backward "
                 "(fewer activations alive); interleaved = 1F1B over parallel.virtual_stages chunks per rank "
                 "(bubble / V); zero_bubble = ZB-H1, weight gradients deferred into the bubble",
         .choices = {"gpipe", "1f1b", "interleaved", "zero_bubble"}});
  s.add({.name = "parallel.virtual_stages", .type = T::Int, .default_value = int64_t{1},
         .help = "interleaved pipeline: model chunks per rank (rank p holds chunks p, p + P, ...); M must be a "
                 "multiple of parallel.pipeline", .min = 1.0});
  s.add({.name = "parallel.microbatches", .type = T::Int, .default_value = int64_t{1},
         .help = "micro-batches per step (pipeline fill; without a pipeline: gradient accumulation, the data axis "
                 "communicating once per step)", .min = 1.0});
  s.add({.name = "parallel.microbatch_max", .type = T::Int, .default_value = int64_t{0},
         .help = "without a pipeline: the most examples a rank runs forward and backward at once; a larger batch "
                 "(e.g. grown by train.batch_schedule) is accumulated over more micro-batches; 0 = no limit",
         .min = 0.0});
  s.add({.name = "parallel.recompute", .type = T::String, .default_value = std::string("none"),
         .help = "activation recompute of the transformer blocks under any plan: full = a block keeps only its "
                 "input and reruns its forward in backward; selective = keep the GEMM outputs, recompute norms, "
                 "activations and the attention core where it keeps T x T weights (docs/memory.md)",
         .choices = {"none", "full", "selective"}});
  s.add({.name = "parallel.recompute_layers", .type = T::Int, .default_value = int64_t{0},
         .help = "recompute only the first N transformer blocks (0 = all)", .min = 0.0});
  s.add({.name = "parallel.stage_boundaries", .type = T::String, .default_value = std::string(""),
         .help = "pipeline cut as the first layer index of stages 1..P-1, e.g. \"3, 6\"; empty: balanced by "
                 "parallel.balance"});
  s.add({.name = "parallel.balance", .type = T::String, .default_value = std::string("params"),
         .help = "how an automatic pipeline cut balances stages: params = estimated cost (parameters and FLOPs); "
                 "time = measured forward+backward time per layer",
         .choices = {"params", "time"}});
  s.add({.name = "parallel.transport", .type = T::String, .default_value = std::string("auto"),
         .help = "how ranks talk: auto = shm when all ranks share this host, else tcp",
         .choices = {"auto", "tcp", "shm", "mpi"}, .env = "BRAID_TRANSPORT"});
  s.add({.name = "parallel.tcp_streams", .type = T::Int, .default_value = int64_t{1},
         .help = "tcp connections per peer, one byte stream striped over them in 256 KiB slices; more can help "
                 "where one flow cannot fill the path (docs/communication.md)",
         .min = 1.0, .max = static_cast<double>(comm::kMaxTcpStreams), .env = "BRAID_TCP_STREAMS"});
  s.add({.name = "parallel.max_message_mib", .type = T::Int,
         .default_value = static_cast<int64_t>(comm::kDefaultMaxMessage >> 20),
         .help = "tcp, shm: largest message, in MiB, that may arrive before its receive is posted (it is buffered), "
                 "and most that one peer's early messages may add up to; past it the connection to that peer fails "
                 "naming it (docs/reliability.md, \"Hostile bytes\")",
         .min = 1.0, .max = static_cast<double>(int64_t{1} << 20), .env = "BRAID_MAX_MESSAGE_MIB"});
  s.add({.name = "parallel.device_comm", .type = T::String, .default_value = std::string("auto"),
         .help = "train.device = cuda: how collectives move device buffers (docs/gpu.md, \"Several GPUs and every "
                 "plan\"): nccl = NCCL (every rank with a GPU of its own); staged = copied to the host, braid's own "
                 "algorithms over parallel.transport, copied back (several processes on one GPU); auto = nccl where "
                 "it can serve the group, else staged",
         .choices = {"auto", "nccl", "staged"}});
  s.add({.name = "parallel.codec", .type = T::String, .default_value = std::string("none"),
         .help = "gradient compression of allreduce buckets and parameter-server pushes (docs/compression.md): "
                 "none = f32; fp16/bf16 = 16-bit casts, reduced in the half type; qsgd = stochastic quantisation to "
                 "codec.qsgd_levels levels; onebit = signs with per-chunk scales and error feedback; topk = the "
                 "codec.topk_ratio largest entries with error feedback; powersgd = rank codec.powersgd_rank "
                 "approximation with error feedback and warm start (allreduce only)",
         .choices = {"none", "fp16", "bf16", "qsgd", "onebit", "topk", "powersgd"}});
  s.add({.name = "codec.qsgd_levels", .type = T::Int, .default_value = int64_t{127},
         .help = "qsgd: levels s per sign (1 + ceil(log2(s+1)) bits a value; 127 = 8 bits)", .min = 1.0,
         .max = 16777216.0});
  s.add({.name = "codec.qsgd_chunk", .type = T::Int, .default_value = int64_t{512},
         .help = "qsgd: values that share one norm (smaller: less variance, more norms)", .min = 1.0});
  s.add({.name = "codec.onebit_chunk", .type = T::Int, .default_value = int64_t{256},
         .help = "onebit: values that share one pair of scales", .min = 1.0});
  s.add({.name = "codec.topk_ratio", .type = T::Float, .default_value = 0.01,
         .help = "topk: fraction of each bucket's entries sent per step", .min = 1e-9, .max = 1.0});
  s.add({.name = "codec.powersgd_rank", .type = T::Int, .default_value = int64_t{2},
         .help = "powersgd: rank r of each matrix's approximation", .min = 1.0});
  s.add({.name = "codec.powersgd_min_rate", .type = T::Float, .default_value = 2.0,
         .help = "powersgd: a tensor is compressed only when (rows + cols) r x this < rows x cols; others are "
                 "all-reduced as they are", .min = 0.0});
  s.add({.name = "codec.warmup_steps", .type = T::Int, .default_value = int64_t{0},
         .help = "plain all-reduce for each bucket's first steps (PowerSGD's start_powerSGD_iter)", .min = 0.0});
  s.add({.name = "codec.min_elements", .type = T::Int, .default_value = int64_t{0},
         .help = "buckets with fewer values are all-reduced uncompressed (where compression does not pay)",
         .min = 0.0});
  s.add({.name = "codec.error_feedback", .type = T::Bool, .default_value = true,
         .help = "onebit, topk, powersgd: keep what was not sent and add it to the next step's gradient"});
  s.add({.name = "parallel.bucket_kb", .type = T::Int, .default_value = int64_t{256},
         .help = "gradient bucket size in KiB (allreduce; zero stages 1-2)", .min = 1.0});
  s.add({.name = "parallel.overlap", .type = T::Bool, .default_value = true,
         .help = "start each bucket's all-reduce during backward (false: all after backward)"});
  s.add({.name = "parallel.algorithm", .type = T::String, .default_value = std::string("auto"),
         .help = "all-reduce algorithm; auto picks by the alpha-beta cost model",
         .choices = {"auto", "ring", "recursive_doubling", "halving_doubling", "binary_tree", "double_binary_tree",
                     "binary_blocks", "direct", "hierarchical", "shared_memory"}});
  s.add({.name = "parallel.timeout_s", .type = T::Float, .default_value = 300.0,
         .help = "seconds any collective may wait for a peer before failing with the missing rank's name",
         .min = 0.1, .max = 3.2e7});  // a year; durations are nanoseconds in an int64
  s.add({.name = "parallel.join_timeout_s", .type = T::Float, .default_value = 60.0,
         .help = "seconds joining the job may take (reaching the store, every rank publishing its address, "
                 "connecting); a timeout names the ranks that never came",
         .min = 0.1, .max = 3.2e7});
}

void add_ps_keys(Schema& s) {
  using T = ValueType;
  s.add({.name = "ps.consistency", .type = T::String, .default_value = std::string("bsp"),
         .help = "how servers combine pushes: bsp = every worker each clock; asp = on arrival; ssp = asp with "
                 "pulls held within ps.staleness clocks of the slowest worker; softsync = n-softsync",
         .choices = {"bsp", "asp", "ssp", "softsync"}});
  s.add({.name = "ps.staleness", .type = T::Int, .default_value = int64_t{2},
         .help = "ssp: how many clocks a worker may run ahead of the slowest", .min = 0.0});
  s.add({.name = "ps.softsync_n", .type = T::Int, .default_value = int64_t{1},
         .help = "softsync: apply after ceil(workers / n) gradients, each scaled by 1 / staleness", .min = 1.0});
  s.add({.name = "ps.backup_workers", .type = T::Int, .default_value = int64_t{0},
         .help = "bsp: apply each clock after workers - b gradients, dropping the late ones", .min = 0.0});
  s.add({.name = "ps.updater", .type = T::String, .default_value = std::string("sgd"),
         .help = "the optimizer the servers run (hyper-parameters from optim.*: lr, momentum, beta1, beta2, eps, "
                 "weight_decay)",
         .choices = {"sgd", "momentum", "adagrad", "adam"}});
  s.add({.name = "ps.async_momentum", .type = T::String, .default_value = std::string("offset"),
         .help = "ps.updater = momentum under asp, ssp or softsync: offset = the servers run 1 - A (1 - "
                 "optim.momentum), at least 0, for A asynchronous workers (softsync: n), so that A updates keep the "
                 "long-run step of one synchronous update; as_set = optim.momentum unchanged",
         .choices = {"offset", "as_set"}});
  s.add({.name = "ps.n_fetch", .type = T::Int, .default_value = int64_t{1},
         .help = "pull fresh weights every n steps (Downpour SGD's n_fetch)", .min = 1.0});
  s.add({.name = "ps.n_push", .type = T::Int, .default_value = int64_t{1},
         .help = "push the summed gradients every n steps (Downpour SGD's n_push)", .min = 1.0});
  s.add({.name = "ps.checkpoint_every", .type = T::Int, .default_value = int64_t{0},
         .help = "servers checkpoint their shards every n updates (0: only when training ends)", .min = 0.0});
  s.add({.name = "ps.checkpoint_dir", .type = T::String, .default_value = std::string(""),
         .help = "where servers keep their shards; empty: <train.out_dir>/ps"});
}

}  // namespace braid::train
