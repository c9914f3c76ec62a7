#include "braid/parallel/skeleton/skeleton.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "braid/autograd/node.h"
#include "braid/base/deadline.h"
#include "braid/base/digest.h"
#include "braid/base/json_number.h"
#include "braid/base/log.h"
#include "braid/parallel/skeleton/partition.h"

namespace braid::parallel::skeleton {

namespace {

// fn(entry, j) for the j-th of the sorted entry numbers `index` in `tensors`
// (one per parameter, entry numbers starting at offset[p]).
template <class T, class Fn>
void at_entries(const std::vector<Tensor>& tensors, const std::vector<int64_t>& offset,
                const std::vector<int64_t>& index, Fn&& fn) {
  if (index.empty()) return;
  size_t p = 0;
  T* data = tensors[0].data<T>();  // looked up once per parameter: data<T>() checks, 15 ms over 269k entries
  for (size_t j = 0; j < index.size(); ++j) {
    while (index[j] >= offset[p + 1]) data = tensors[++p].data<T>();
    fn(data[index[j] - offset[p]], j);
  }
}

// Sent by each rank, bandwidth-optimal (see skeleton.h; all-reduce: flat_replica.h).
double allgather_bytes(double bytes_per_rank, int world) { return (world - 1) * bytes_per_rank; }

}  // namespace

SkeletonPartition::SkeletonPartition(comm::Communicator data_axis, SkeletonOptions options)
    : comm_(std::move(data_axis)), o_(options) {
  if (!comm_.valid()) fail<ValueError>("skeleton partition: needs a valid data-axis communicator");
  if (!(o_.fraction > 0.0 && o_.fraction <= 1.0)) {
    fail<ConfigError>("parallel.skeleton_fraction must be in (0, 1], got {}", o_.fraction);
  }
  if (o_.every < 1) fail<ConfigError>("parallel.skeleton_every must be >= 1, got {}", o_.every);
}

void SkeletonPartition::wait(comm::Work work, const char* what) const {
  wait_explained(work, Deadline::after(o_.timeout * 2), [&] {
    return fmt::format("rank {} of {} on the data axis: skeleton partition's {} after step {}", comm_.rank(),
                       comm_.size(), what, steps_);
  });
}

void SkeletonPartition::setup(const std::vector<NamedParameter>& params, const std::vector<NamedParameter>& buffers,
                              const nlohmann::json& description) {
  flat_ = FlatParams(params, "skeleton partition");
  // Replicas start equal: restoring an entry to its merged value is only
  // "its owner's training alone" if every replica holds the same merged value.
  buffers_ = start_replicas_equal(comm_, params, buffers, description, o_.timeout, "skeleton partition");
  merged_ = flat_.empty();
  snapshot();
  ready_ = true;
  if (!pending_.empty()) {
    apply_pending();
    return;
  }
  std::vector<double> importance = values();
  add_importance(importance, std::vector<double>(importance.size(), 0.0), importance);  // no gradient yet: |w|
  choose(importance);
  agree_on_skeleton();
}

void SkeletonPartition::snapshot() { flat_.pack_values(merged_); }

std::vector<double> SkeletonPartition::values() const {
  std::vector<double> v(static_cast<size_t>(flat_.entries()));
  for (size_t p = 0; p < flat_.tensors().size(); ++p) {
    const std::vector<double> part = flat_.tensors()[p].to_vector<double>();
    std::copy(part.begin(), part.end(), v.begin() + flat_.offsets()[p]);
  }
  return v;
}

std::vector<double> SkeletonPartition::local_grads() const {
  std::vector<double> g(static_cast<size_t>(flat_.entries()), 0.0);
  for (size_t p = 0; p < flat_.tensors().size(); ++p) {
    const Tensor grad = flat_.tensors()[p].grad();
    if (!grad.defined()) continue;  // no gradient this step: importance |w|
    const std::vector<double> part = grad.to_vector<double>();
    std::copy(part.begin(), part.end(), g.begin() + flat_.offsets()[p]);
  }
  return g;
}

void SkeletonPartition::choose(const std::vector<double>& importance) {
  std::vector<uint8_t> mask(static_cast<size_t>(flat_.entries()), 0);
  for (int64_t i : top_entries(importance, skeleton_size(flat_.entries(), o_.fraction))) mask[static_cast<size_t>(i)] = 1;
  use_skeleton(std::move(mask));
}

void SkeletonPartition::use_skeleton(std::vector<uint8_t> mask) {
  skeleton_ = std::move(mask);
  skeleton_index_.clear();
  for (int64_t i = 0; i < flat_.entries(); ++i) {
    if (skeleton_[static_cast<size_t>(i)]) skeleton_index_.push_back(i);
  }
  assign_owners();
}

void SkeletonPartition::assign_owners() {
  owner_ = draw_owners(skeleton_, comm_.size(), o_.seed, static_cast<uint64_t>(round_));
  std::vector<int64_t> count(static_cast<size_t>(comm_.size()), 0);
  keep_.assign(static_cast<size_t>(flat_.entries()), 1);
  mine_.clear();
  const int me = comm_.rank();
  for (int64_t i = 0; i < flat_.entries(); ++i) {
    const int32_t r = owner_[static_cast<size_t>(i)];
    if (r < 0) continue;
    ++count[static_cast<size_t>(r)];
    if (r == me) {
      mine_.push_back(i);
    } else {
      keep_[static_cast<size_t>(i)] = 0;
    }
  }
  most_owned_ = *std::max_element(count.begin(), count.end());
}

double SkeletonPartition::average_skeleton(const std::vector<Tensor>& into, std::vector<double>* grads) {
  const auto k = static_cast<int64_t>(skeleton_index_.size());
  if (comm_.size() == 1 || k == 0) return 0;
  const int64_t per = grads ? 2 * k : k;
  Tensor buf = Tensor::empty({per}, flat_.dtype());
  visit_flat_dtype(flat_.dtype(), [&](auto v) {
    using T = decltype(v);
    T* b = buf.data<T>();
    // Fraction 1: the skeleton is every entry in order, one copy per parameter.
    const bool whole = k == flat_.entries();
    if (whole) {
      for (size_t p = 0; p < into.size(); ++p) std::memcpy(b + flat_.offsets()[p], into[p].raw_data(), into[p].nbytes());
    } else {
      at_entries<T>(into, flat_.offsets(), skeleton_index_, [&](T& e, size_t j) { b[j] = e; });
    }
    if (grads) {
      for (int64_t j = 0; j < k; ++j) b[k + j] = static_cast<T>((*grads)[static_cast<size_t>(skeleton_index_[static_cast<size_t>(j)])]);
    }
    wait(comm_.allreduce({b, static_cast<size_t>(per), flat_.dtype()},
                         {.op = comm::Op::avg, .algorithm = o_.algorithm, .timeout = o_.timeout}),
         "all-reduce of the skeleton");
    if (whole) {
      for (size_t p = 0; p < into.size(); ++p) std::memcpy(into[p].raw_data(), b + flat_.offsets()[p], into[p].nbytes());
    } else {
      at_entries<T>(into, flat_.offsets(), skeleton_index_, [&](T& e, size_t j) { e = b[j]; });
    }
    if (grads) {
      for (int64_t j = 0; j < k; ++j) (*grads)[static_cast<size_t>(skeleton_index_[static_cast<size_t>(j)])] = static_cast<double>(b[k + j]);
    }
  });
  return allreduce_bytes(static_cast<double>(buf.nbytes()), comm_.size());
}

double SkeletonPartition::gather_owned(const std::vector<Tensor>& into, std::vector<double>* grads) {
  const int world = comm_.size();
  const int64_t m = most_owned_;
  if (world == 1 || m == 0) return 0;  // one rank owns all; or all is skeleton
  // Every rank sends m entries (padding after its own), so one all-gather
  // of equal blocks carries the owners' unequal shares.
  const int64_t per = grads ? 2 * m : m;
  Tensor in = Tensor::zeros({per}, flat_.dtype()), out = Tensor::empty({per * world}, flat_.dtype());
  visit_flat_dtype(flat_.dtype(), [&](auto v) {
    using T = decltype(v);
    T* a = in.data<T>();
    at_entries<T>(into, flat_.offsets(), mine_, [&](T& e, size_t c) { a[c] = e; });
    if (grads) {
      for (size_t c = 0; c < mine_.size(); ++c) a[static_cast<size_t>(m) + c] = static_cast<T>((*grads)[static_cast<size_t>(mine_[c])]);
    }
    wait(comm_.allgather({a, static_cast<size_t>(per), flat_.dtype()},
                         {out.raw_data(), static_cast<size_t>(per * world), flat_.dtype()}, {.timeout = o_.timeout}),
         "all-gather of the owners' entries");
    const T* o = out.data<T>();
    std::vector<int64_t> cursor(static_cast<size_t>(world), 0);  // owners' entries arrive in index order
    for (size_t p = 0; p < into.size(); ++p) {
      T* w = into[p].data<T>();
      for (int64_t i = flat_.offsets()[p]; i < flat_.offsets()[p + 1]; ++i) {
        const int32_t r = owner_[static_cast<size_t>(i)];
        if (r < 0) continue;
        const int64_t at = r * per + cursor[static_cast<size_t>(r)]++;
        w[i - flat_.offsets()[p]] = o[at];
        if (grads) (*grads)[static_cast<size_t>(i)] = static_cast<double>(o[at + m]);
      }
    }
  });
  return allgather_bytes(static_cast<double>(in.nbytes()), world);
}

double SkeletonPartition::average(const std::vector<Tensor>& tensors) {
  return average_over(comm_, tensors, o_.timeout, "skeleton partition");
}

double SkeletonPartition::average_buffers() {
  std::vector<Tensor> tensors;
  for (const auto& b : buffers_) tensors.push_back(b.tensor);
  return average(tensors);
}

void SkeletonPartition::commit_merge() {
  snapshot();
  last_merge_ = steps_;
  ++merges_;
}

void SkeletonPartition::after_step() {
  if (!ready_) fail<ValueError>("skeleton partition: after_step() before setup()");
  autograd::NoGradGuard no_grad;
  ++steps_, ++steps_here_;
  // Entries owned elsewhere: undo this replica's update (its owner's counts).
  // A branch-free select over every entry vectorises; the owners are random,
  // so a list of the entries to restore would be slower to walk.
  if (static_cast<int64_t>(mine_.size() + skeleton_index_.size()) < flat_.entries()) {
    visit_flat_dtype(flat_.dtype(), [&](auto v) {
      using T = decltype(v);
      for (size_t p = 0; p < flat_.tensors().size(); ++p) {
        T* w = flat_.tensors()[p].data<T>();
        const T* m = merged_.data<T>() + flat_.offsets()[p];
        const uint8_t* keep = keep_.data() + flat_.offsets()[p];
        const int64_t count = flat_.offsets()[p + 1] - flat_.offsets()[p];
        for (int64_t j = 0; j < count; ++j) w[j] = keep[j] ? w[j] : m[j];
      }
    });
  }
  // Fraction 1 has nothing to choose: no merge, plain averaging every step.
  const bool merging = steps_ % o_.every == 0 && static_cast<int64_t>(skeleton_index_.size()) < flat_.entries();
  if (!merging) {
    bytes_ += average_skeleton(flat_.tensors(), nullptr);
    return;
  }
  std::vector<double> grads = local_grads();
  bytes_ += average_skeleton(flat_.tensors(), &grads);
  bytes_ += gather_owned(flat_.tensors(), &grads);
  bytes_ += average_buffers();
  // The merged weights and each entry's gradient as its trainers saw it:
  // the same on every rank, so every rank picks the same skeleton.
  std::vector<double> importance = values();
  add_importance(importance, grads, importance);
  ++round_;
  choose(importance);
  bytes_ += agree_on_skeleton();
  commit_merge();
}

double SkeletonPartition::agree_on_skeleton() {
  if (comm_.size() == 1) return 0;
  // The choice is a pure function of values every rank received from the
  // same collectives; should an algorithm round differently on some rank, a
  // near-tie could still split the ranks' choices, and with them the packing
  // of every later exchange. A 16-byte check catches that; rank 0's mask
  // then wins.
  const int64_t h = crc32(std::as_bytes(std::span(skeleton_)));
  std::vector<int64_t> check{h, ~h};  // max of both: max and ~min
  wait(comm_.allreduce(check, {.op = comm::Op::max, .timeout = o_.timeout}), "check that every rank chose one skeleton");
  double bytes = allreduce_bytes(static_cast<double>(check.size() * sizeof(int64_t)), comm_.size());
  if (check[0] == ~check[1]) return bytes;
  logging::warn("skeleton partition: the data axis's ranks chose different skeletons at merge round {} (collectives "
                "rounded differently); all take data rank 0's", round_);
  std::vector<uint8_t> mask(skeleton_);
  wait(comm_.broadcast(mask, {.root = 0, .timeout = o_.timeout}), "broadcast of data rank 0's skeleton");
  use_skeleton(std::move(mask));
  return bytes + static_cast<double>(flat_.entries());  // at most the whole mask once per rank
}

void SkeletonPartition::merge() {
  if (!ready_) fail<ValueError>("skeleton partition: merge() before setup()");
  bytes_ += gather_owned(flat_.tensors(), nullptr);
  bytes_ += average_buffers();
  commit_merge();
}

void SkeletonPartition::finish() {
  // Every rank has taken the same steps, so all merge or none does.
  if (ready_ && steps_ > last_merge_) merge();
}

nn::NamedTensors SkeletonPartition::model_state(const nn::Module& model) {
  if (!ready_ || steps_ == last_merge_) return model.state_dict();  // already merged and equal
  // The merge in copies: training goes on with the replicas as they are, so
  // checkpointing does not change the run. Not counted in bytes_ (not training).
  std::vector<Tensor> merged, buffers;
  for (const Tensor& p : flat_.tensors()) merged.push_back(p.clone());
  gather_owned(merged, nullptr);
  for (const auto& b : buffers_) buffers.push_back(b.tensor.clone());
  average(buffers);
  nn::NamedTensors out = model.state_dict();
  for (auto& [name, t] : out) {
    for (size_t p = 0; p < flat_.names().size(); ++p) {
      if (flat_.names()[p] == name) t = merged[p];
    }
    for (size_t b = 0; b < buffers_.size(); ++b) {
      if (buffers_[b].name == name) t = buffers[b];
    }
  }
  return out;
}
nlohmann::json SkeletonPartition::state_dict() const {
  if (!ready_) return pending_.is_null() ? nlohmann::json::object() : pending_;
  return {{"steps", steps_}, {"round", round_}, {"entries", flat_.entries()}, {"fraction", o_.fraction},
          {"every", o_.every}, {"skeleton", mask_to_hex(skeleton_)}};
}

void SkeletonPartition::load_state_dict(const nlohmann::json& state) {
  if (state.empty()) return;  // a checkpoint of another plan: start afresh
  pending_ = state;
  if (!ready_) return;  // applied by setup()
  snapshot();
  apply_pending();
}

void SkeletonPartition::apply_pending() {
  const int64_t entries = json_integer<int64_t>(pending_.at("entries"));
  if (entries != flat_.entries()) {
    fail<ConfigError>("the checkpoint's skeleton partition covers {} entries, this model has {}", entries, flat_.entries());
  }
  round_ = json_integer<int64_t>(pending_.at("round"));
  // A checkpoint holds the merged model (model_state), now on every rank.
  steps_ = last_merge_ = json_integer<int64_t>(pending_.at("steps"));
  use_skeleton(mask_from_hex(pending_.at("skeleton").get<std::string>(), flat_.entries()));
  pending_ = nullptr;
}

double SkeletonPartition::full_averaging_bytes() const {
  return static_cast<double>(steps_here_) * allreduce_bytes(static_cast<double>(flat_.entries() * itemsize(flat_.dtype())), comm_.size());
}

nlohmann::json SkeletonPartition::stats() const {
  const double steps = static_cast<double>(std::max<int64_t>(steps_here_, 1));
  const double full = full_averaging_bytes() / steps;
  return {{"replicas", comm_.size()}, {"entries", flat_.entries()}, {"skeleton_entries", skeleton_index_.size()},
          {"fraction", o_.fraction}, {"every", o_.every}, {"steps", steps_here_}, {"merges", merges_},
          {"bytes_sent", bytes_}, {"bytes_per_step", bytes_ / steps}, {"full_averaging_bytes_per_step", full},
          {"ratio", full > 0 ? nlohmann::json(bytes_ / steps / full) : nlohmann::json(nullptr)}};
}

std::string SkeletonPartition::report() const {
  if (steps_here_ == 0) return "";
  const nlohmann::json s = stats();
  const double per = s["bytes_per_step"].get<double>(), full = s["full_averaging_bytes_per_step"].get<double>();
  return fmt::format("skeleton partition: {} of {} entries in the skeleton, {} merge{} in {} steps; {:.0f} bytes sent "
                     "per rank per step, full averaging {:.0f} ({})",
                     skeleton_index_.size(), flat_.entries(), merges_, merges_ == 1 ? "" : "s", steps_here_, per, full,
                     full > 0 ? fmt::format("{:.3f}x", per / full) : std::string("one replica: nothing sent"));
}

}  // namespace braid::parallel::skeleton
