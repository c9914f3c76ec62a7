#include "braid/parallel/averaging/center_on_servers.h"

#include "braid/base/error.h"

namespace braid::parallel::averaging {

CenterOnServers::CenterOnServers(std::shared_ptr<comm::Transport> transport, CenterOptions options)
    : transport_(std::move(transport)), o_(options), client_(*transport_, {.servers = o_.servers, .timeout = o_.timeout}) {}

CenterOnServers::~CenterOnServers() {
  try {
    push_.wait(Deadline::after(o_.timeout));
  } catch (...) {
  }
}

std::vector<float> CenterOnServers::start(std::span<const float> initial) {
  ps::PsConfig config{.consistency = o_.consistency, .staleness = o_.staleness, .barrier = o_.barrier,
                      .updater = {.name = "sgd", .weight_decay = 0.0},
                      .timeout_s = std::chrono::duration<double>(o_.timeout).count()};
  config.validate(client_.workers());
  clock_ = client_.hello(config, static_cast<int64_t>(initial.size()));
  if (client_.worker() == 0) {
    client_.init_dense(initial).wait(Deadline::after(o_.timeout));
    bytes_ += static_cast<double>(initial.size_bytes());
  }
  std::vector<float> center(initial.size());
  client_.pull_dense(center, -1).wait(Deadline::after(o_.timeout * 3));
  updates_at_start_ = client_.view().version;
  return center;
}

void CenterOnServers::add(std::span<const float> change) {
  push_.wait(Deadline::after(o_.timeout * 3));  // `sending_` is free again
  sending_.resize(change.size());
  for (size_t i = 0; i < change.size(); ++i) sending_[i] = -change[i];  // SGD at lr 1: w -= g
  push_ = client_.push_dense(sending_, clock_, 1.0);
  ++clock_;
  bytes_ += static_cast<double>(change.size_bytes());
}

void CenterOnServers::pull(std::span<float> center) {
  const bool gated = o_.consistency == ps::Consistency::ssp;
  client_.pull_dense(center, gated ? clock_ : -1).wait(Deadline::after(o_.timeout * 3));
}

void CenterOnServers::finish(std::span<float> center) {
  if (done_) return;
  done_ = true;
  push_.wait(Deadline::after(o_.timeout * 3));
  if (client_.worker() == 0) client_.wait_for_other_workers();
  pull(center);
  client_.done();
}

}  // namespace braid::parallel::averaging
