// The worker's side of a parameter-server job: push and pull, batched per
// server and asynchronous. Every call returns a Work (the project's one
// waitable handle); the spans passed in must stay valid until it completes.
//
// Dense values are the whole model's flat f32 vector (keyspace.h); the
// client sends each server its range. Sparse keys are split by server and
// the rows scattered back in the caller's key order. Requests to one server
// go out in call order (one exchange in flight per server, on that server's
// own thread), so a pull issued after a push sees that push.
//
// Clocks: push_dense ends the worker's clock (pushes of sparse rows for that
// clock must come before it); a pull passes the worker's clock so the server
// can hold it back under bsp and ssp (-1: do not wait).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "braid/base/deadline.h"
#include "braid/comm/codec/codec.h"
#include "braid/comm/transport/transport.h"
#include "braid/comm/work.h"
#include "braid/ps/config.h"
#include "braid/ps/keyspace.h"

namespace braid::ps {

struct ClientOptions {
  int servers = 1;
  Duration timeout = std::chrono::seconds(300);  // per exchange with one server
};

// What the servers reported in their latest replies.
struct ServerView {
  int64_t version = 0;   // dense updates applied (summed over servers)
  int64_t clock = 0;     // the lowest server clock
  int64_t slowest = -1;  // the slowest live worker's clock (lowest over servers)
  int64_t pushes = 0;    // clocks every worker pushed, summed (the newest count over servers)
};

class Client {
 public:
  // `transport` ranks: servers 0..S-1, workers S..; this worker is rank() - S.
  Client(comm::Transport& transport, ClientOptions options);
  ~Client();

  int worker() const;
  int workers() const;
  const DenseLayout& layout() const;

  // Registers with every server (blocking). Returns the clock to start from:
  // 0 in a fresh job; after servers recovered their shards, the highest
  // checkpointed clock among them.
  int64_t hello(const PsConfig& config, int64_t dense_total);
  comm::Work init_dense(std::span<const float> weights);
  comm::Work push_dense(std::span<const float> grads, int64_t clock, double lr);
  comm::Work pull_dense(std::span<float> weights, int64_t clock);

  void define_table(int table, int64_t dim, double init_std);
  comm::Work push_sparse(int table, std::span<const uint64_t> keys, std::span<const float> grads, int64_t clock,
                         double lr);
  comm::Work pull_sparse(int table, std::span<const uint64_t> keys, std::span<float> rows, int64_t clock);
  // Tells every server this worker finished (blocking).
  void done();
  // After this worker's last push: blocks until every other worker has
  // finished training (or is gone, or silent past the servers' timeout),
  // asking the servers every `poll`; meanwhile no consistency gate waits for
  // this worker (as if it had finished), though it may still pull. The job's
  // final model is the servers' once all its workers are through. A
  // TimeoutError, naming how many still train, when for twice the timeout
  // no dense update reached the servers and no other worker finished (the
  // others hung without dying).
  void wait_for_other_workers(Duration poll = std::chrono::milliseconds(20));

  ServerView view() const;
  // Bytes and encode time of the dense pushes since the last call (a codec's
  // figures; zero without one).
  comm::codec::CodecStats take_codec_stats();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace braid::ps
