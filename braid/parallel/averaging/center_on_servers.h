// A center variable kept on parameter servers (braid/ps/) for the
// asynchronous members of the averaging family: asynchronous EASGD's x~ and
// asynchronous ADMM's consensus z. The servers run plain SGD with learning
// rate 1 and no weight decay, so a push of d moves the center by -d: workers
// send the change they want, the servers add it on arrival (asp), or under
// ssp with a staleness bound and a partial barrier.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "braid/comm/transport/transport.h"
#include "braid/ps/client.h"
#include "braid/ps/config.h"

namespace braid::parallel::averaging {

struct CenterOptions {
  int servers = 1;
  ps::Consistency consistency = ps::Consistency::asp;
  int64_t staleness = 0;  // ssp
  int64_t barrier = 0;    // ssp
  Duration timeout = std::chrono::seconds(300);
};

class CenterOnServers {
 public:
  // `transport`: servers are ranks 0..servers-1, this worker one of the rest.
  CenterOnServers(std::shared_ptr<comm::Transport> transport, CenterOptions options);
  ~CenterOnServers();

  int worker() const { return client_.worker(); }
  int workers() const { return client_.workers(); }
  // Registers; worker 0's `initial` becomes the center; returns the center
  // (every worker waits for it).
  std::vector<float> start(std::span<const float> initial);
  // Changes other workers added to the center by the time start() read it
  // (0: it read worker 0's initial values as they were sent).
  int64_t updates_at_start() const { return updates_at_start_; }
  // Adds `change` to the center (asynchronous: returns at once; the previous
  // push is waited for first) and ends this worker's clock.
  void add(std::span<const float> change);
  // The center as the servers hold it now, after this worker's pushes;
  // under ssp held back as the staleness bound and barrier say.
  void pull(std::span<float> center);
  // The last pushes are through; worker 0 (whose model is the job's) waits
  // for every other worker to finish; then the center as the servers hold it
  // goes into `center` and the servers are told this worker is done.
  void finish(std::span<float> center);

  int64_t clock() const { return clock_; }
  // Every worker's adds so far, as the servers' latest reply said.
  int64_t adds() const { return client_.view().pushes; }
  double bytes_sent() const { return bytes_; }

 private:
  std::shared_ptr<comm::Transport> transport_;
  CenterOptions o_;
  ps::Client client_;
  std::vector<float> sending_;
  comm::Work push_ = comm::Work::completed();
  int64_t clock_ = 0, updates_at_start_ = 0;
  double bytes_ = 0;
  bool done_ = false;
};

}  // namespace braid::parallel::averaging
