#include "braid/linear/sandblaster.h"

#include <algorithm>

#include "braid/base/error.h"
#include "braid/linear/ranks.h"

namespace braid::linear_model {

namespace {
constexpr uint64_t kRequestTag = 1;  // worker -> coordinator: "give me a portion"
constexpr uint64_t kReplyTag = 2;    // coordinator -> worker: portion id, or -1 for "done"
}  // namespace

SandblasterSpace::SandblasterSpace(const Problem& p, const Examples& train, const SolverOptions& o,
                                   comm::Communicator comm)
    : p_(p), train_(train), comm_(std::move(comm)), shards_(o.shards) {
  const int size = comm_.size(), rank = comm_.rank();
  if (shards_ < 1 || size < shards_ + 2)
    fail<ConfigError>("sandblaster needs a coordinator, {} shard(s) and at least one worker: {} ranks, have {}",
                      std::max(shards_, 1), std::max(shards_, 1) + 2, size);
  workers_ = size - shards_ - 1;
  role_ = rank == 0 ? Role::coordinator : rank <= shards_ ? Role::shard : Role::worker;
  if (role_ == Role::shard) std::tie(begin_, end_) = part_range(train.x.cols, shards_, rank - 1);
  const int64_t n = train.size();
  portion_ = o.portion > 0 ? o.portion : std::max<int64_t>(1, n / (4 * workers_));
  portions_ = (n + portion_ - 1) / portion_;
  portions_done_.assign(static_cast<size_t>(workers_), 0);
}

double SandblasterSpace::sum(double local) {
  // Reduced to the coordinator, which forms the scalar and broadcasts it.
  if (comm_.size() > 1) {
    wait_for(comm_, comm_.reduce(comm::BufferRef(&local, 1, DType::f64), {.root = 0}),
             "sandblaster: a shard's partial dot product to the coordinator");
  }
  broadcast_from(comm_, std::span(&local, 1), 0, "sandblaster: the coordinator's dot product");
  return local;
}

std::vector<double> SandblasterSpace::gather(std::span<const double> w) {
  std::vector<double> full(static_cast<size_t>(train_.x.cols), 0.0);
  std::copy(w.begin(), w.end(), full.begin() + begin_);
  sum_over(comm_, full, fmt::format("sandblaster evaluation {}: the shards publishing w", evaluations_));
  return full;
}

void SandblasterSpace::hand_out_portions() {
  std::vector<double> request(static_cast<size_t>(workers_)), reply(static_cast<size_t>(workers_));
  std::vector<comm::Work> pending(static_cast<size_t>(workers_));
  std::vector<bool> open(static_cast<size_t>(workers_), true);
  auto post = [&](int k) {
    pending[k] = comm_.recv(comm::BufferRef(&request[k], 1, DType::f64), shards_ + 1 + k, {.tag = kRequestTag});
  };
  for (int k = 0; k < workers_; ++k) post(k);
  int64_t next = 0;
  int left = workers_;
  const Deadline deadline = Deadline::after(comm_.options().timeout);
  while (left > 0) {
    // Whichever worker asks next gets the next portion. Waiting is progress
    // on stream transports, so the coordinator waits briefly on each in turn
    // rather than polling done().
    for (int k = 0; k < workers_; ++k) {
      if (!open[k]) continue;
      try {
        pending[k].wait(Deadline::after(std::chrono::microseconds(200)).min(deadline));
      } catch (const TimeoutError&) {
        if (!deadline.expired()) continue;
        fail<TimeoutError>("rank 0 (sandblaster coordinator), evaluation {}: worker rank {} asked for no portion in {}",
                           evaluations_, shards_ + 1 + k, format_duration(comm_.options().timeout));
      } catch (const PeerError& e) {
        fail<PeerError>("rank 0 (sandblaster coordinator), evaluation {}: worker rank {}: {}", evaluations_,
                        shards_ + 1 + k, e.what());
      }
      reply[k] = next < portions_ ? static_cast<double>(next++) : -1.0;
      if (reply[k] >= 0) ++portions_done_[k];
      wait_for(comm_, comm_.send(comm::BufferRef(&reply[k], 1, DType::f64), shards_ + 1 + k, {.tag = kReplyTag}),
               fmt::format("sandblaster evaluation {}: a portion for worker rank {}", evaluations_, shards_ + 1 + k));
      if (reply[k] < 0) {
        open[k] = false, --left;
      } else {
        post(k);
      }
    }
  }
}

void SandblasterSpace::run_portions(std::span<const double> w, std::span<double> sums) {
  const int64_t n = train_.size();
  const size_t d = w.size();
  for (;;) {
    double request = static_cast<double>(evaluations_), reply = 0;
    const std::string what = fmt::format("sandblaster evaluation {}: asking the coordinator for a portion", evaluations_);
    wait_for(comm_, comm_.send(comm::BufferRef(&request, 1, DType::f64), 0, {.tag = kRequestTag}), what);
    wait_for(comm_, comm_.recv(comm::BufferRef(&reply, 1, DType::f64), 0, {.tag = kReplyTag}), what);
    if (reply < 0) return;
    const auto first = static_cast<int64_t>(reply) * portion_, last = std::min(n, first + portion_);
    for (int64_t r = first; r < last; ++r) {
      const auto row = train_.x.row(r);
      double z = 0;
      for (size_t k = 0; k < row.index.size(); ++k) z += row.value[k] * w[row.index[k]];
      sums[d] += loss_value(p_.loss, train_.y[r], z);
      const double g = loss_derivative(p_.loss, train_.y[r], z);
      for (size_t k = 0; k < row.index.size(); ++k) sums[row.index[k]] += g * row.value[k];
    }
  }
}

double SandblasterSpace::evaluate(std::span<const double> w, std::span<double> grad) {
  ++evaluations_;
  const std::vector<double> full = gather(w);
  const size_t d = full.size();
  // [gradient sum over rows, loss sum]: workers fill it, shards and the coordinator add zeros.
  std::vector<double> sums(d + 1, 0.0);
  if (role_ == Role::coordinator) hand_out_portions();
  if (role_ == Role::worker) run_portions(full, sums);
  sum_over(comm_, sums, fmt::format("sandblaster evaluation {}: adding the workers' gradients", evaluations_));
  const auto n = static_cast<double>(train_.size());
  for (size_t j = 0; j < grad.size(); ++j) grad[j] = sums[begin_ + j] / n + p_.reg.l2 * w[j];
  double norm = 0;
  for (double v : full) norm += v * v;
  return sums[d] / n + p_.reg.l2 / 2 * norm;
}

Result solve_sandblaster(const Problem& p, const Examples& train, const Examples* test, const SolverOptions& o,
                         comm::Communicator& comm, const Monitor& monitor) {
  check_lbfgs_problem(p, "sandblaster l-bfgs");
  EpochClock clock(o, p, test, monitor);
  SandblasterSpace space(p, train, o, comm);
  return solve_in_space(space, clock, o);
}

}  // namespace braid::linear_model
