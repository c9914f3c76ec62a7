#include "braid/parallel/bucketed_allreduce.h"

#include <cstring>

#include "braid/parallel/agreement.h"
#include "braid/comm/tensor_buffer.h"

namespace braid::parallel {

namespace {

// The default: the bucket's all-reduce average, nothing remembered.
class AverageHook final : public BucketHook {
 public:
  explicit AverageHook(const DataParallelOptions& o) : algorithm_(o.algorithm), timeout_(o.timeout) {}
  comm::Work run(comm::Communicator& c, const GradBucket& b, bool background) override {
    return c.allreduce(comm::buffer_of(b.flat), {.op = comm::Op::avg, .algorithm = algorithm_, .timeout = timeout_, .background = background});
  }

 private:
  comm::Algorithm algorithm_;
  Duration timeout_;
};

}  // namespace

BucketedAllreduce::BucketedAllreduce(comm::Communicator comm, DataParallelOptions options, std::unique_ptr<BucketHook> hook)
    : comm_(std::move(comm)), options_(options), hook_(std::move(hook)) {
  if (!comm_.valid()) fail<ValueError>("bucketed all-reduce: needs a valid communicator");
  if (!hook_) hook_ = std::make_unique<AverageHook>(options_);
}

BucketedAllreduce::~BucketedAllreduce() {
  // Never leave a collective writing into freed buckets.
  for (Bucket& b : buckets_) {
    if (b.launched) {
      try {
        b.work.wait(Deadline::after(options_.timeout));
      } catch (const Error&) {
      }
    }
  }
}

void BucketedAllreduce::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                              const nlohmann::json& description) {
  params_ = params;
  buffers_ = buffers;
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& p : params_) shapes.push_back({p.name, p.tensor.shape(), std::string(braid::name(p.tensor.dtype()))});
  for (const auto& b : buffers_) shapes.push_back({b.name, b.tensor.shape(), std::string(braid::name(b.tensor.dtype()))});
  check_agreement(comm_, {{"config", description}, {"params", shapes}}, options_.timeout);

  // Rank 0's initial parameters and buffers everywhere.
  for (const auto& p : params_) {
    if (!p.tensor.is_contiguous()) fail<ValueError>("bucketed all-reduce: parameter {} is not contiguous", p.name);
  }
  broadcast_from_rank0(params_);
  broadcast_buffers();

  // Buckets in reverse registration order, one dtype per bucket.
  const size_t n = params_.size();
  bucket_of_.assign(n, 0);
  views_.assign(n, Tensor());
  ready_.assign(n, false);
  buckets_.clear();
  std::vector<std::vector<size_t>> groups;
  size_t bytes = 0;
  for (size_t k = n; k-- > 0;) {
    const Tensor& t = params_[k].tensor;
    const bool new_group = groups.empty() || bytes >= options_.bucket_bytes ||
                           params_[groups.back().front()].tensor.dtype() != t.dtype();
    if (new_group) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += t.nbytes();
  }
  for (auto& g : groups) {
    Bucket b;
    int64_t total = 0;
    for (size_t k : g) total += params_[k].tensor.numel();
    b.grads.index = buckets_.size();
    const Tensor& first = params_[g.front()].tensor;
    b.grads.flat = Tensor::zeros({total}, first.dtype(), first.device());
    int64_t offset = 0;
    for (size_t k : g) {
      const Tensor& t = params_[k].tensor;
      b.grads.shapes.push_back(t.shape());
      views_[k] = b.grads.flat.as_strided(t.shape(), contiguous_strides(t.shape()), offset);
      bucket_of_[k] = buckets_.size();
      offset += t.numel();
    }
    b.params = g;
    buckets_.push_back(std::move(b));
  }
}

void BucketedAllreduce::on_grad_ready(size_t index, Tensor& grad) {
  if (!sync_ || index >= params_.size() || ready_[index]) return;
  const Tensor& view = views_[index];
  if (grad.raw_data() != view.raw_data()) view.copy_from(grad);
  ready_[index] = true;
  Bucket& b = buckets_[bucket_of_[index]];
  if (++b.ready == b.params.size() && options_.overlap) launch_ready_buckets();
}

void BucketedAllreduce::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].ready == buckets_[next_launch_].params.size()) {
    launch(buckets_[next_launch_++], /*background=*/true);  // runs while backward goes on
    launched_early_++;
  }
}

void BucketedAllreduce::launch(Bucket& b, bool background) {
  b.work = hook_->run(comm_, b.grads, background);
  b.launched = true;
}

void BucketedAllreduce::broadcast_from_rank0(const std::vector<NamedParameter>& tensors) {
  std::vector<comm::Work> works;
  for (const auto& p : tensors) {
    const Tensor& t = p.tensor;
    works.push_back(comm_.broadcast(comm::buffer_of(t), {.root = 0, .timeout = options_.timeout}));
  }
  comm::wait_all(works, Deadline::after(options_.timeout * 2));
}

void BucketedAllreduce::broadcast_buffers() {
  if (buffers_.empty()) return;
  // Buffers may be views (running stats are updated in place); travel through contiguous copies.
  std::vector<NamedParameter> staged;
  for (const auto& b : buffers_) staged.push_back({b.name, b.tensor.is_contiguous() ? b.tensor : b.tensor.contiguous()});
  broadcast_from_rank0(staged);
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (staged[i].tensor.raw_data() != buffers_[i].tensor.raw_data()) buffers_[i].tensor.copy_from(staged[i].tensor);
  }
}

// Like DDP's broadcast_buffers: every rank's next forward sees rank 0's running statistics.
void BucketedAllreduce::after_step() {
  if (sync_) broadcast_buffers();
}

// Every data rank's hook state on data rank 0, as "r<rank>.<name>": what a
// rank remembers (error feedback) is its own, so a resumed run needs all of them.
nn::NamedTensors BucketedAllreduce::rank_state() {
  const nn::NamedTensors mine = hook_->state_dict();
  nn::NamedTensors all;
  const int p = comm_.size();
  for (const auto& [name, t] : mine) {
    const Tensor flat = t.contiguous();
    Tensor gathered = Tensor::empty({p * flat.numel()}, flat.dtype());
    comm_.gather({flat.raw_data(), static_cast<size_t>(flat.numel()), flat.dtype()},
                 {gathered.raw_data(), static_cast<size_t>(gathered.numel()), gathered.dtype()},
                 {.root = 0, .timeout = options_.timeout})
        .wait(Deadline::after(options_.timeout));
    if (comm_.rank() != 0) continue;
    for (int r = 0; r < p; ++r) {
      all.emplace_back(fmt::format("r{}.{}", r, name),
                       gathered.as_strided(t.shape(), contiguous_strides(t.shape()), r * flat.numel()).clone());
    }
  }
  return all;
}

void BucketedAllreduce::load_rank_state(const nn::NamedTensors& state) {
  const std::string prefix = fmt::format("r{}.", comm_.rank());
  nn::NamedTensors mine;
  for (const auto& [name, t] : state) {
    if (name.starts_with(prefix)) mine.emplace_back(name.substr(prefix.size()), t);
  }
  hook_->load_state_dict(mine);
}

void BucketedAllreduce::finish() {
  if (!sync_) return;
  // Parameters that got no gradient this step contribute zeros.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (!ready_[k]) {
      views_[k].fill(0);
      buckets_[bucket_of_[k]].ready++;
      ready_[k] = true;
    }
  }
  while (next_launch_ < buckets_.size()) launch(buckets_[next_launch_++], /*background=*/false);  // waited for below
  // Buckets run one after another on the communicator, each timing itself
  // out from its own start: a deadline per bucket, from when the one before
  // it ended, lets a bucket's own error (which names the peer) come first.
  for (Bucket& b : buckets_) {
    try {
      b.work.wait(Deadline::after(comm::collective_backstop(options_.timeout)));
    } catch (const TimeoutError& e) {
      fail<TimeoutError>("rank {}: data-parallel gradient all-reduce did not finish: {}", comm_.rank(), e.what());
    }
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    const Tensor& p = params_[k].tensor;
    const Tensor g = p.grad();
    if (!g.defined() || g.raw_data() != views_[k].raw_data()) p.set_grad(views_[k]);
  }
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.launched = false;
  }
  std::fill(ready_.begin(), ready_.end(), false);
  next_launch_ = 0;
}

}  // namespace braid::parallel
