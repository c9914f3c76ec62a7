#include "braid/parallel/gossip/gossip.h"

#include <cstring>

#include "braid/autograd/node.h"
#include "braid/base/log.h"

namespace braid::parallel::gossip {

namespace {

constexpr uint64_t kTagSpace = uint64_t{1} << 38;  // p2p tags are < 2^39

}  // namespace

Gossip::Gossip(comm::Communicator data_axis, GossipOptions options)
    : comm_(std::move(data_axis)), o_(options),
      graph_(o_.topology, comm_.valid() ? comm_.size() : 1, o_.torus_rows) {
  if (!comm_.valid()) fail<ValueError>("gossip: needs a valid data-axis communicator");
  if (o_.consensus_every < 0) fail<ConfigError>("gossip.consensus_every must be >= 0, got {}", o_.consensus_every);
  if (o_.max_staleness < 0) fail<ConfigError>("gossip.max_staleness must be >= 0, got {}", o_.max_staleness);
  in_ = graph_.in_neighbours(comm_.rank());
  out_ = graph_.out_neighbours(comm_.rank());
}

void Gossip::wait(const comm::Work& work, const std::string& what) const {
  wait_explained(work, Deadline::after(o_.timeout), [&] {
    return fmt::format("rank {} of {} on the data axis: gossip's {} in step {}", comm_.rank(), comm_.size(), what,
                       steps_ + 1);
  });
}

void Gossip::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                   const nlohmann::json& description) {
  flat_ = FlatParams(params, "gossip");
  buffers_ = start_replicas_equal(comm_, params, buffers, description, o_.timeout, "gossip");
  averaged_at_ = steps_;
  exchange_.reset();
  sent_ = flat_.empty();
  got_.clear();
  for (size_t j = 0; j < in_.size(); ++j) got_.push_back(flat_.empty());
  if (o_.async && comm_.size() > 1) {
    latest_ = std::make_unique<LatestExchange>(comm_, in_, out_, flat_.entries(), flat_.dtype(), o_.timeout);
  }
  ready_ = true;
  if (comm_.rank() == 0) {
    logging::info("gossip (D-PSGD{}): {}",
                  o_.async ? fmt::format(", asynchronous: latest weights up to {} steps old", o_.max_staleness) : "",
                  graph_.describe_in_full());
  }
}

void Gossip::before_forward() {
  if (!ready_) fail<ValueError>("gossip: before_forward() before setup()");
  if (exchange_ || stepping_) fail<ValueError>("gossip: before_forward() twice without after_step() (step {})", steps_ + 1);
  if (latest_) {
    stepping_ = true;
    const int sent = latest_->offer([&](const Tensor& into) { flat_.pack_values(into); }, steps_);
    bytes_ += static_cast<double>(sent) * static_cast<double>(flat_.bytes());
    return;
  }
  Exchange e;
  flat_.pack_values(sent_);
  const uint64_t tag = static_cast<uint64_t>(steps_) % kTagSpace;
  const auto n = static_cast<size_t>(flat_.entries());
  // Receives first: on a rendezvous transport (inproc) a send completes only
  // once its receive is posted, and every rank posts before it waits.
  for (size_t j = 0; j < in_.size(); ++j) {
    e.recvs.push_back(comm_.recv({got_[j].raw_data(), n, flat_.dtype()}, in_[j], {.tag = tag}));
  }
  for (int j : out_) e.sends.push_back(comm_.send({sent_.raw_data(), n, flat_.dtype()}, j, {.tag = tag}));
  exchange_ = std::move(e);
}

void Gossip::after_step() {
  if (!ready_) fail<ValueError>("gossip: after_step() before setup()");
  if (!exchange_ && !stepping_) fail<ValueError>("gossip: after_step() without before_forward() (step {})", steps_ + 1);
  autograd::NoGradGuard no_grad;
  if (latest_) {
    latest_->poll(steps_);
    mix_latest();
  } else {
    const Exchange e = std::move(*exchange_);
    exchange_.reset();
    for (size_t j = 0; j < in_.size(); ++j) wait(e.recvs[j], fmt::format("receive of rank {}'s weights", in_[j]));
    mix();
    // The next step overwrites the snapshot: its sends must be over (on a
    // rendezvous transport, once the out-neighbours' before_forward took it).
    for (size_t j = 0; j < out_.size(); ++j) wait(e.sends[j], fmt::format("send of its weights to rank {}", out_[j]));
    bytes_ += static_cast<double>(out_.size() * flat_.bytes());
  }
  stepping_ = false;
  ++steps_, ++steps_here_;
  if (o_.consensus_every > 0 && steps_ % o_.consensus_every == 0) {
    const double d = consensus_distance();
    if (comm_.rank() == 0) logging::info("gossip: consensus distance {:.4g} after step {}", d, steps_);
  }
}

void Gossip::mix() {
  const double w = graph_.weight();
  visit_flat_dtype(flat_.dtype(), [&](auto v) {
    using T = decltype(v);
    const T* s = sent_.data<T>();
    // x_i(k+1) = x_i(k) - gamma u + sum_{j != i} W_ij (x_j(k) - x_i(k)):
    // differences from the snapshot, so the local update stays as it is.
    // One pass per neighbour: plain loops the compiler vectorises.
    for (const Tensor& got : got_) {
      const T* g = got.data<T>();
      int64_t at = 0;
      for (const Tensor& p : flat_.tensors()) {
        T* x = p.data<T>();
        const int64_t count = p.numel();
        for (int64_t i = 0; i < count; ++i) x[i] += static_cast<T>(w) * (g[at + i] - s[at + i]);
        at += count;
      }
    }
  });
}

void Gossip::mix_latest() {
  const double w = graph_.weight();
  std::vector<const Tensor*> mixing;  // the in-neighbours' new weights, each mixed once
  for (size_t j = 0; j < latest_->in_degree(); ++j) {
    if (!latest_->fresh(j)) continue;  // none new: its weight stays on x_i
    latest_->use(j);
    const int64_t age = std::max<int64_t>(steps_ - latest_->sender_step(j), 0);
    if (age > o_.max_staleness) {
      ++too_old_;
      continue;
    }
    ++mixed_, age_sum_ += age;
    mixing.push_back(&latest_->latest(j));
  }
  if (mixing.empty()) return;
  // x_i <- x_i + w sum_j (x_j - x_i) = (1 - k w) x_i + w sum_j x_j, all from the same x_i.
  const double keep = 1.0 - static_cast<double>(mixing.size()) * w;
  visit_flat_dtype(flat_.dtype(), [&](auto v) {
    using T = decltype(v);
    std::vector<const T*> g;
    for (const Tensor* t : mixing) g.push_back(t->data<T>());
    int64_t off = 0;
    for (const Tensor& p : flat_.tensors()) {
      T* x = p.data<T>();
      const int64_t count = p.numel();
      for (int64_t i = 0; i < count; ++i) {
        T sum = 0;
        for (const T* gj : g) sum += gj[off + i];
        x[i] = static_cast<T>(keep) * x[i] + static_cast<T>(w) * sum;
      }
      off += count;
    }
  });
}

double Gossip::measure(const Tensor& mean) {
  flat_.pack_values(mean);
  average_over(comm_, {mean}, o_.timeout, "gossip");
  std::vector<double> d{0.0};
  visit_flat_dtype(flat_.dtype(), [&](auto v) {
    using T = decltype(v);
    const T* m = mean.data<T>();
    int64_t at = 0;
    for (const Tensor& p : flat_.tensors()) {
      const T* x = p.data<T>();
      for (int64_t i = 0; i < p.numel(); ++i, ++at) {
        const double diff = static_cast<double>(x[i]) - static_cast<double>(m[at]);
        d[0] += diff * diff;
      }
    }
  });
  if (comm_.size() > 1) {
    wait(comm_.allreduce(d, {.op = comm::Op::avg, .timeout = o_.timeout}), "all-reduce of the consensus distance");
  }
  consensus_ = d[0];
  consensus_step_ = steps_;
  return d[0];
}

double Gossip::consensus_distance() {
  if (!ready_) fail<ValueError>("gossip: consensus_distance() before setup()");
  return measure(flat_.empty());
}

void Gossip::finish() {
  if (!ready_) return;
  if (exchange_ || stepping_) fail<ValueError>("gossip: finish() inside a step (before_forward() without after_step())");
  if (latest_) latest_->close(steps_);  // every neighbour done: no message is left in flight
  // Every rank has taken the same steps, so all measure (and average) or none does.
  if (steps_ == averaged_at_) return;
  Tensor mean = flat_.empty();
  measure(mean);
  if (!o_.final_average) return;
  flat_.unpack_values(mean);
  std::vector<Tensor> buffers;
  for (const auto& b : buffers_) buffers.push_back(b.tensor);
  average_over(comm_, buffers, o_.timeout, "gossip");
  averaged_at_ = steps_;
}

nn::NamedTensors Gossip::model_state(const nn::Module& model) {
  nn::NamedTensors out = model.state_dict();
  if (!ready_ || steps_ == averaged_at_) return out;  // all equal already
  Tensor mean = flat_.empty();
  flat_.pack_values(mean);
  average_over(comm_, {mean}, o_.timeout, "gossip");
  std::vector<Tensor> buffers;
  for (const auto& b : buffers_) buffers.push_back(b.tensor.clone());
  average_over(comm_, buffers, o_.timeout, "gossip");
  // Cut the flat mean into tensors shaped like the parameters.
  const size_t item = itemsize(flat_.dtype());
  int64_t at = 0;
  for (size_t p = 0; p < flat_.names().size(); ++p) {
    const Tensor& like = flat_.tensors()[p];
    Tensor t = Tensor::empty(like.shape(), like.dtype());
    std::memcpy(t.raw_data(), static_cast<const std::byte*>(mean.raw_data()) + static_cast<size_t>(at) * item, t.nbytes());
    at += like.numel();
    for (auto& [name, v] : out) {
      if (name == flat_.names()[p]) v = t;
    }
  }
  for (size_t b = 0; b < buffers_.size(); ++b) {
    for (auto& [name, v] : out) {
      if (name == buffers_[b].name) v = buffers[b];
    }
  }
  return out;
}

nlohmann::json Gossip::state_dict() const { return {{"steps", steps_}}; }

void Gossip::load_state_dict(const nlohmann::json& state) {
  if (state.empty()) return;  // a checkpoint of another plan
  // A checkpoint holds x-bar: every replica resumes from it, equal.
  steps_ = averaged_at_ = state.value("steps", int64_t{0});
}

nlohmann::json Gossip::stats() const {
  const double steps = static_cast<double>(std::max<int64_t>(steps_here_, 1));
  const double allreduce = allreduce_bytes(static_cast<double>(flat_.bytes()), comm_.size());
  return {{"topology", std::string(topology_name(graph_.topology()))},
          {"grid", {graph_.rows(), graph_.cols()}},
          {"replicas", comm_.size()},
          {"receives_from", in_},
          {"sends_to", out_},
          {"lambda2", graph_.second_eigenvalue()},
          {"spectral_gap", graph_.spectral_gap()},
          {"entries", flat_.entries()},
          {"steps", steps_here_},
          {"bytes_sent", bytes_},
          {"bytes_per_step", bytes_ / steps},
          {"allreduce_bytes_per_step", allreduce},
          {"consensus_distance", consensus_ ? nlohmann::json(*consensus_) : nlohmann::json(nullptr)},
          {"consensus_step", consensus_step_},
          {"final_average", o_.final_average},
          {"mode", o_.async ? "async" : "sync"},
          {"sends_skipped", latest_ ? latest_->offers_skipped() : 0},
          {"mixed_per_step", static_cast<double>(mixed_) / steps},
          {"mean_staleness", mean_staleness()},
          {"too_old", too_old_}};
}

std::string Gossip::report() const {
  if (steps_here_ == 0) return "";
  const double per = bytes_ / static_cast<double>(steps_here_);
  const double allreduce = allreduce_bytes(static_cast<double>(flat_.bytes()), comm_.size());
  const std::string async =
      latest_ ? fmt::format("; asynchronous: {:.2f} neighbour weights mixed per step (mean staleness {:.2f} steps), {} "
                            "too old, {} sends skipped (the previous to that neighbour still in flight)",
                            static_cast<double>(mixed_) / static_cast<double>(steps_here_),
                            mean_staleness(), too_old_,
                            latest_->offers_skipped())
              : "";
  return fmt::format("gossip (D-PSGD): {}; rank {} receives from {}; {} steps, {:.0f} bytes sent per rank per step "
                     "(all-reduce {:.0f}){}; consensus distance {} at step {}{}",
                     graph_.describe(), comm_.rank(), in_, steps_here_, per, allreduce, async,
                     consensus_ ? fmt::format("{:.4g}", *consensus_) : std::string("not measured"), consensus_step_,
                     o_.final_average ? ", then averaged exactly" : "; replicas left apart (gossip.final_average = false)");
}

}  // namespace braid::parallel::gossip
