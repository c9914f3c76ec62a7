#include "braid/parallel/zero/zero.h"

#include <map>
#include <set>
#include <unordered_map>

#include "braid/parallel/agreement.h"
#include "braid/comm/tensor_buffer.h"
#include "braid/nn/attention.h"

namespace braid::parallel::zero {

namespace {

comm::BufferRef ref(const Tensor& t) { return comm::buffer_of(t); }

Tensor flat_view(const Tensor& flat, int64_t at, int64_t n) { return flat.as_strided({n}, {1}, flat.offset() + at); }

// Rank 0's list of names on every rank of `comm`.
std::vector<std::string> names_of_rank0(comm::Communicator& comm, const std::set<std::string>& mine,
                                        Duration timeout) {
  std::string joined;
  for (const std::string& n : mine) joined += n + "\n";
  const Deadline deadline = Deadline::after(timeout * 2);
  std::vector<int64_t> len{static_cast<int64_t>(joined.size())};
  comm.broadcast(len, {.root = 0, .timeout = timeout}).wait(deadline);
  std::vector<uint8_t> bytes(joined.begin(), joined.end());
  bytes.resize(static_cast<size_t>(len[0]));
  comm.broadcast(bytes, {.root = 0, .timeout = timeout}).wait(deadline);
  std::vector<std::string> out;
  std::string cur;
  for (uint8_t c : bytes) {
    if (c == '\n') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

ZeroSync::ZeroSync(comm::Communicator data, ZeroOptions options, std::shared_ptr<nn::Module> model,
                   std::function<bool(const std::string&)> takes)
    : comm_(std::move(data)), o_(options), model_(std::move(model)) {
  if (!comm_.valid()) fail<ValueError>("zero: needs the data axis's communicator");
  if (o_.stage < 1 || o_.stage > 3) fail<ConfigError>("parallel.zero_stage = {} (known: 1, 2, 3)", o_.stage);
  if (takes && o_.stage == 3) fail<ValueError>("zero: stage 3 gathers whole layers; it takes every parameter");
  std::vector<int64_t> numels;
  for (auto& [name, t] : model_->named_parameters()) {
    if (takes && !takes(name)) continue;
    if (t.dtype() != DType::f32 || !t.is_contiguous()) fail<ValueError>("zero: parameter {} must be contiguous f32", name);
    params_.push_back({name, t});
    numels.push_back(t.numel());
  }
  std::vector<std::vector<size_t>> groups;
  if (o_.stage == 3) {
    auto seq = std::dynamic_pointer_cast<nn::Sequential>(model_);
    if (!seq) {
      fail<ConfigError>("parallel.zero_stage = 3 needs a model built as an nn::Sequential (each layer's parameters "
                        "are gathered around it)");
    }
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < params_.size(); ++i) index[params_[i].name] = i;
    unit_of_layer_.assign(seq->size(), -1);
    for (size_t l = 0; l < seq->size(); ++l) {
      std::vector<size_t> group;
      for (const auto& [rel, t] : seq->layer(l)->named_parameters()) group.push_back(index.at(seq->name_of(l) + "." + rel));
      if (group.empty()) continue;
      unit_of_layer_[l] = static_cast<int>(groups.size());
      groups.push_back(std::move(group));
    }
    // A head tied to the token embedding owns no parameter but reads the
    // embedding's table: it runs with the embedding's unit gathered.
    for (size_t l = 0; l < seq->size(); ++l) {
      const auto* tied = dynamic_cast<const nn::TiedHead*>(seq->layer(l).get());
      if (!tied) continue;
      for (size_t e = 0; e < seq->size() && unit_of_layer_[l] < 0; ++e) {
        const auto* embed = dynamic_cast<const nn::TokenPositionEmbedding*>(seq->layer(e).get());
        if (embed && embed->tok() == tied->tied()) unit_of_layer_[l] = unit_of_layer_[e];
      }
      if (unit_of_layer_[l] < 0) {
        fail<ConfigError>("parallel.zero_stage = 3: the tied head at layer {} reads a table outside the model",
                          seq->name_of(l));
      }
    }
  } else {
    groups = buckets_by_size(numels, o_.bucket_bytes);
  }
  layout_ = std::make_unique<Layout>(numels, groups, comm_.size());
  place_parameters();
  if (o_.stage == 3) install_layer_calls();
}

ZeroSync::~ZeroSync() {
  // Never leave a collective writing into freed buffers.
  for (Unit& u : units_) {
    try {
      if (u.launched) u.reduce.wait(Deadline::after(o_.timeout));
      if (u.gathered == Gathered::gathering) u.gather.wait(Deadline::after(o_.timeout));
    } catch (const Error&) {
    }
  }
  if (auto seq = std::dynamic_pointer_cast<nn::Sequential>(model_); seq && o_.stage == 3) seq->set_layer_call(nullptr);
}

std::string ZeroSync::name() const { return fmt::format("zero-{}", o_.stage); }

Device ZeroSync::device() const { return params_.empty() ? Device::cpu : params_[0].tensor.device(); }

void ZeroSync::place_parameters() {
  const auto& buckets = layout_->buckets();
  units_.clear();
  units_.resize(buckets.size());
  int64_t shard_at = 0;
  // The flat buffers live where the parameters do (a GPU: their collectives go to NCCL).
  const Device dev = device();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const Bucket& bk = buckets[b];
    Unit& u = units_[b];
    u.params = Tensor::zeros({bk.padded}, DType::f32, dev);
    u.params.set_memory_category(MemoryCategory::parameters);
    for (size_t k = 0; k < bk.params.size(); ++k) {
      const Tensor& p = params_[bk.params[k]].tensor;
      Tensor view = u.params.as_strided(p.shape(), contiguous_strides(p.shape()), bk.offsets[k]);
      view.copy_from(p);
      p.set_data(view);  // every handle of the parameter now lives in the bucket
    }
    if (o_.stage == 1) {
      u.grads = Tensor::zeros({bk.padded}, DType::f32, dev);
      u.grads.set_memory_category(MemoryCategory::gradients);
    }
    u.shard_at = shard_at;
    shard_at += bk.piece;
  }
  if (o_.stage >= 2) {
    shard_grads_ = Tensor::zeros({shard_at}, DType::f32, dev);
    shard_grads_.set_memory_category(MemoryCategory::gradients);
  }
  if (o_.stage == 3) {
    shard_ = Tensor::zeros({shard_at}, DType::f32, dev);
    shard_.set_memory_category(MemoryCategory::parameters);
    for (size_t b = 0; b < buckets.size(); ++b) shard_piece(shard_, b).copy_from(my_piece(units_[b].params, b));
  }
  owned_ = layout_->owned(comm_.rank());
  slices_.clear();
  for (const OwnedSlice& s : owned_) {
    const Tensor& base = o_.stage == 3 ? shard_piece(shard_, s.bucket) : my_piece(units_[s.bucket].params, s.bucket);
    slices_.push_back({params_[s.param].name, flat_view(base, s.at, s.numel())});
  }
  ready_.assign(params_.size(), false);
  launch_order_.clear();
  for (size_t b = 0; b < units_.size(); ++b) launch_order_.push_back(o_.stage == 3 ? units_.size() - 1 - b : b);
}

Tensor ZeroSync::my_piece(const Tensor& flat, size_t bucket) const {
  const Bucket& bk = layout_->buckets()[bucket];
  return flat_view(flat, bk.piece * comm_.rank(), bk.piece);
}

Tensor ZeroSync::shard_piece(const Tensor& flat, size_t bucket) const {
  return flat_view(flat, units_[bucket].shard_at, layout_->buckets()[bucket].piece);
}

void ZeroSync::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                     const nlohmann::json& description) {
  if (params.size() != params_.size()) {
    fail<ValueError>("zero: set up with {} parameters, built over {}", params.size(), params_.size());
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name != params_[i].name) {
      fail<ValueError>("zero: parameter {} is {} at setup, {} when built", i, params[i].name, params_[i].name);
    }
  }
  buffers_ = buffers;
  nlohmann::json shapes = nlohmann::json::array();
  for (const auto& p : params_) shapes.push_back({p.name, p.tensor.shape()});
  for (const auto& b : buffers_) shapes.push_back({b.name, b.tensor.shape(), std::string(braid::name(b.tensor.dtype()))});
  check_agreement(comm_, {{"config", description}, {"zero_stage", o_.stage}, {"params", shapes}}, o_.timeout);

  // Data rank 0's parameters everywhere, one broadcast per bucket.
  std::vector<comm::Work> works;
  for (Unit& u : units_) works.push_back(comm_.broadcast(ref(u.params), {.root = 0, .timeout = o_.timeout}));
  comm::wait_all(works, Deadline::after(o_.timeout * 2));
  broadcast_buffers();
  if (o_.stage == 3) {
    for (size_t b = 0; b < units_.size(); ++b) shard_piece(shard_, b).copy_from(my_piece(units_[b].params, b));
    release_all();
  }
  set_up_ = true;
}

void ZeroSync::attach(optim::Optimizer& optimizer) {
  if (!optimizer.works_on_shards()) {
    fail<ConfigError>("ZeRO gives each data rank slices of the parameters; optimizer {} cannot run on slices",
                      optimizer.name());
  }
  const auto& mine = optimizer.params();
  bool same = mine.size() == slices_.size();
  for (size_t j = 0; same && j < mine.size(); ++j) same = mine[j].raw_data() == slices_[j].tensor.raw_data();
  if (!same) {
    fail<ValueError>("zero: the optimizer must be built over the plan's optimizer_parameters() ({} slices), it has {} "
                     "parameters", slices_.size(), mine.size());
  }
}

void ZeroSync::on_grad_ready(size_t index, Tensor& grad) {
  if (index >= params_.size()) return;
  const size_t b = layout_->bucket_of(index);
  Unit& u = units_[b];
  if (o_.stage == 3 && ++u.ready_in_backward == layout_->buckets()[b].params.size()) release(b);
  if (!sync_ || ready_[index]) return;
  ready_[index] = true;
  const Tensor& p = params_[index].tensor;
  if (o_.stage >= 2 && !u.grads.defined()) {
    const Bucket& bk = layout_->buckets()[b];
    u.grads = Tensor::empty({bk.padded}, DType::f32, device());
    u.grads.set_memory_category(MemoryCategory::gradients);
    if (bk.padded > bk.numel) flat_view(u.grads, bk.numel, bk.padded - bk.numel).fill(0);
  }
  Tensor dst = u.grads.as_strided(p.shape(), contiguous_strides(p.shape()), layout_->offset_of(index));
  if (grad.raw_data() != dst.raw_data()) dst.copy_from(grad);
  // Stages 2 and 3 keep only the reduced piece: the whole gradient goes now.
  if (o_.stage >= 2) p.set_grad(Tensor());
  if (++u.ready == layout_->buckets()[b].params.size()) launch_ready();
}

void ZeroSync::launch_ready() {
  while (next_launch_ < launch_order_.size()) {
    const size_t b = launch_order_[next_launch_];
    if (units_[b].ready != layout_->buckets()[b].params.size()) break;
    launch(units_[b], b);
    ++next_launch_;
  }
}

void ZeroSync::launch(Unit& u, size_t b) {
  const Tensor out = o_.stage == 1 ? my_piece(u.grads, b) : shard_piece(shard_grads_, b);
  u.reduce = comm_.reduce_scatter(ref(u.grads), ref(out), {.op = comm::Op::avg, .timeout = o_.timeout});
  u.launched = true;
  if (o_.stage == 1) return;
  // Stages 2-3 hold a bucket's whole gradients only until its reduce-scatter
  // is done, and at most kInFlight of them at once, so backward never holds
  // much more than the pieces.
  constexpr size_t kInFlight = 2;
  in_flight_.push_back(b);
  while (!in_flight_.empty() && (in_flight_.size() > kInFlight || units_[in_flight_.front()].reduce.done())) {
    finish_reduction(units_[in_flight_.front()]);
    in_flight_.pop_front();
  }
}

void ZeroSync::finish_reduction(Unit& u) {
  if (!u.launched) return;
  try {
    // Units reduce one after another: this one may have started after the
    // wait did, and its own error (naming the peer) should come first.
    u.reduce.wait(Deadline::after(comm::collective_backstop(o_.timeout)));
  } catch (const TimeoutError& e) {
    fail<TimeoutError>("rank {}: ZeRO stage {} gradient reduce-scatter on the data axis did not finish: {}",
                       comm_.rank(), o_.stage, e.what());
  }
  u.launched = false;
  u.ready = 0;
  if (o_.stage >= 2) u.grads = Tensor();  // the reduce-scatter input; the piece is in shard_grads_
}

void ZeroSync::finish() {
  if (!sync_) return;
  // Parameters that got no gradient this step contribute zeros.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (ready_[k]) continue;
    Tensor zeros = Tensor::zeros(params_[k].tensor.shape(), DType::f32, params_[k].tensor.device());
    on_grad_ready(k, zeros);
  }
  while (next_launch_ < launch_order_.size()) {
    launch(units_[launch_order_[next_launch_]], launch_order_[next_launch_]);
    ++next_launch_;
  }
  wait_reductions();
  for (size_t j = 0; j < slices_.size(); ++j) {
    const OwnedSlice& s = owned_[j];
    const Tensor& grads = o_.stage == 1 ? my_piece(units_[s.bucket].grads, s.bucket) : shard_piece(shard_grads_, s.bucket);
    slices_[j].tensor.set_grad(flat_view(grads, s.at, s.numel()));
  }
  if (o_.stage == 1) {
    // Backward accumulates straight into the bucket from the next step on.
    for (size_t k = 0; k < params_.size(); ++k) {
      const Tensor& p = params_[k].tensor;
      const Tensor view = units_[layout_->bucket_of(k)].grads.as_strided(p.shape(), contiguous_strides(p.shape()),
                                                                          layout_->offset_of(k));
      const Tensor g = p.grad();
      if (!g.defined() || g.raw_data() != view.raw_data()) p.set_grad(view);
    }
  }
  if (o_.stage == 3) release_all();  // layers a backward never reached
  std::fill(ready_.begin(), ready_.end(), false);
  next_launch_ = 0;
}

void ZeroSync::wait_reductions() {
  for (Unit& u : units_) finish_reduction(u);
  in_flight_.clear();
}

void ZeroSync::after_step() {
  if (o_.stage == 1) {
    // The bucket's values count as zeros for the next backward (a flag, no memset).
    for (const auto& p : params_) p.tensor.zero_grad();
  }
  if (o_.stage <= 2) {
    // Every rank updated its pieces; each bucket's all-gather fills in the rest.
    std::vector<comm::Work> works;
    for (size_t b = 0; b < units_.size(); ++b) {
      works.push_back(comm_.allgather(ref(my_piece(units_[b].params, b)), ref(units_[b].params), {.timeout = o_.timeout}));
    }
    try {
      comm::wait_all(works, Deadline::after(o_.timeout * 2));
    } catch (const TimeoutError& e) {
      fail<TimeoutError>("rank {}: ZeRO stage {} parameter all-gather on the data axis did not finish: {}",
                         comm_.rank(), o_.stage, e.what());
    }
  }
  broadcast_buffers();
}

// Like plain data parallelism: every rank's next forward sees rank 0's
// running statistics.
void ZeroSync::broadcast_buffers() {
  if (buffers_.empty()) return;
  std::vector<Tensor> staged;
  std::vector<comm::Work> works;
  for (const auto& b : buffers_) {
    staged.push_back(b.tensor.is_contiguous() ? b.tensor : b.tensor.contiguous());
    works.push_back(comm_.broadcast(ref(staged.back()), {.root = 0, .timeout = o_.timeout}));
  }
  comm::wait_all(works, Deadline::after(o_.timeout * 2));
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (staged[i].raw_data() != buffers_[i].tensor.raw_data()) buffers_[i].tensor.copy_from(staged[i]);
  }
}

nn::NamedTensors ZeroSync::model_state(const nn::Module& model) {
  if (o_.stage <= 2) return model.state_dict();
  gather_all();
  nn::NamedTensors state = model.state_dict();
  for (auto& [name, t] : state) t = t.clone();
  release_all();
  return state;
}

void ZeroSync::load_model_state(nn::Module& model, const nn::NamedTensors& state) {
  if (o_.stage <= 2 || !set_up_) {
    model.load_state_dict(state);
    return;
  }
  for (size_t b = 0; b < units_.size(); ++b) {  // values come from the state, not from a gather
    units_[b].params.storage()->materialize();
    units_[b].gathered = Gathered::yes;
  }
  model.load_state_dict(state);
  for (size_t b = 0; b < units_.size(); ++b) shard_piece(shard_, b).copy_from(my_piece(units_[b].params, b));
  release_all();
}

optim::OptimizerState ZeroSync::optimizer_state(const optim::Optimizer& optimizer) {
  return gather_optimizer_state(optimizer.state_dict());
}

optim::OptimizerState ZeroSync::gather_optimizer_state(const optim::OptimizerState& local) {
  std::map<std::string, Tensor> by_key(local.tensors.begin(), local.tensors.end());
  std::set<std::string> names;
  for (const auto& [key, t] : local.tensors) names.insert(key.substr(key.find('.') + 1));
  optim::OptimizerState whole;
  whole.scalars = local.scalars;
  whole.scalars["num_params"] = params_.size();
  const bool root = comm_.rank() == 0;
  // Bucket by bucket, each buffer's pieces gathered into the whole run on rank 0.
  for (const std::string& name : names_of_rank0(comm_, names, o_.timeout)) {
    for (size_t b = 0; b < units_.size(); ++b) {
      const Bucket& bk = layout_->buckets()[b];
      Tensor piece = Tensor::zeros({bk.piece});
      for (size_t j = 0; j < owned_.size(); ++j) {
        if (owned_[j].bucket != b) continue;
        const auto it = by_key.find(fmt::format("{}.{}", j, name));
        if (it == by_key.end()) fail<ValueError>("zero: rank {} has no buffer {} for slice {}", comm_.rank(), name, j);
        flat_view(piece, owned_[j].at, owned_[j].numel()).copy_from(it->second);
      }
      Tensor all = root ? Tensor::empty({bk.padded}) : Tensor();
      comm_.gather(ref(piece), root ? ref(all) : comm::BufferRef{}, {.root = 0, .timeout = o_.timeout})
          .wait(Deadline::after(o_.timeout * 2));
      if (!root) continue;
      for (size_t k = 0; k < bk.params.size(); ++k) {
        const Tensor& p = params_[bk.params[k]].tensor;
        whole.tensors.emplace_back(fmt::format("{}.{}", bk.params[k], name),
                                   all.as_strided(p.shape(), contiguous_strides(p.shape()), bk.offsets[k]).clone());
      }
    }
  }
  return whole;
}

void ZeroSync::load_optimizer_state(optim::Optimizer& optimizer, const optim::OptimizerState& state) {
  optimizer.load_state_dict(slice_optimizer_state(state));
}

optim::OptimizerState ZeroSync::slice_optimizer_state(const optim::OptimizerState& state) const {
  const size_t n = state.scalars.value("num_params", size_t{0});
  if (n != params_.size()) fail<ValueError>("optimizer state has {} parameters, this model has {}", n, params_.size());
  // Whole buffers by parameter, then each slice's run of them.
  std::vector<std::vector<std::pair<std::string, Tensor>>> of_param(params_.size());
  for (const auto& [key, t] : state.tensors) {
    const size_t dot = key.find('.');
    size_t i = SIZE_MAX;
    try {
      i = std::stoul(key.substr(0, dot));
    } catch (const std::exception&) {
    }
    if (dot == std::string::npos || i >= params_.size() || t.shape() != params_[i].tensor.shape()) {
      fail<ValueError>("optimizer state: buffer {} fits no parameter of this model", key);
    }
    of_param[i].emplace_back(key.substr(dot + 1), t.to(DType::f32).contiguous());
  }
  optim::OptimizerState mine;
  mine.scalars = state.scalars;
  mine.scalars["num_params"] = slices_.size();
  for (size_t j = 0; j < owned_.size(); ++j) {
    for (const auto& [name, whole] : of_param[owned_[j].param]) {
      mine.tensors.emplace_back(fmt::format("{}.{}", j, name), flat_view(whole, owned_[j].begin, owned_[j].numel()));
    }
  }
  return mine;
}

}  // namespace braid::parallel::zero
