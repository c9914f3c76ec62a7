// Gradient compression on the bucketed all-reduce: a BucketHook that averages
// each bucket through a codec (comm/codec/codec.h, docs/compression.md).
//
// A codec's average is a short sequence of collectives with computation
// between them (encode, all-gather, decode; PowerSGD's two all-reduces), so it
// cannot be one queued collective. Each bucket becomes a task on one thread of
// the hook's own, run in bucket order, so the codec's collectives match across
// ranks and backward goes on meanwhile. They run on a communicator of their
// own (a split of the data axis made at construction), so collectives the
// main thread issues on the data axis during backward (synchronised batch
// norm) can never interleave with them differently on different ranks.
// One BucketState per bucket: error-feedback memory and PowerSGD's Q, saved
// in checkpoints through state_dict() as "b<bucket>.<name>".
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "braid/comm/codec/codec.h"
#include "braid/parallel/bucketed_allreduce.h"

namespace braid::parallel {

class CodecHook final : public BucketHook {
 public:
  // Collective over `data` (it splits off the hook's communicator).
  CodecHook(const comm::Communicator& data, const comm::codec::CodecOptions& options, Duration timeout);
  ~CodecHook() override;

  comm::Work run(comm::Communicator& comm, const GradBucket& bucket, bool background) override;
  nlohmann::json take_stats() override;
  nn::NamedTensors state_dict() const override;
  void load_state_dict(const nn::NamedTensors& state) override;

 private:
  void loop();
  void average(const GradBucket& bucket);

  comm::Communicator comm_;
  std::unique_ptr<comm::codec::Codec> codec_;
  Duration timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::map<size_t, comm::codec::BucketState> states_;  // by bucket index
  nn::NamedTensors pending_;                           // loaded before the buckets existed
  comm::codec::CodecStats stats_;
  std::thread thread_;  // last: starts after everything it uses
};

}  // namespace braid::parallel
