// The tensor-parallel products with their collectives overlapped (Megatron-LM's
// tp-comm-overlap, Wang et al. 2022 "Overlap communication with dependent
// computation via decomposition"): the GEMM beside a collective is cut into
// chunks along the tokens, and the collective of one chunk runs on a
// communication thread while the next chunk multiplies.
//
//   gather_linear           sequence-parallel column layer: y = all-gather_seq(x) w^T
//     forward   all-gather of chunk j+1 in flight while chunk j multiplies
//     backward  dx = g w by chunks, each chunk's reduce-scatter in flight while the next multiplies;
//               dw = g^T x (the gathered input, kept from forward) behind the last ones
//   linear_reduce_scatter   sequence-parallel row layer: y = reduce-scatter_seq(x w^T)
//     forward   chunk j's reduce-scatter in flight while chunk j+1 multiplies
//     backward  the gradient's all-gather by chunks, each chunk's dx = g w while the next arrives
//   copy_linear             plain column layer: y = x w^T
//     backward  the all-reduce of dx = g w in flight while dw = g^T x multiplies
//   linear_allreduce        plain row layer: y = all-reduce(x w^T)
//     forward   chunk j's all-reduce in flight while chunk j+1 multiplies
//
// Every chunk is a set of whole rows, so each output row is the same product
// as without chunks; dw is one product over all rows either way. Bias, when a
// layer has one, is added by the caller. f32 host tensors only (autocast's
// 16-bit products and device tensors go through the blocking collectives of
// collectives.h). Chunks are rows
// [b, e) of every rank's segment of T / t tokens (shard_range of the segment
// into `chunks`), so a chunk's collective moves whole rows of each rank.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "braid/comm/communicator.h"
#include "braid/tensor/tensor.h"

namespace braid::parallel::tensor_parallel {

// A thread that starts collectives the moment they are queued: it waits on
// each Work, and a communicator runs a queued collective in the first thread
// that waits for it (otherwise an engine thread would pick it up only after
// its tick). The caller waits on the same Work and sees its error; this thread
// only drives it.
class CommThread {
 public:
  CommThread();
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;
  void drive(comm::Work w, Duration timeout);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<comm::Work, Duration>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

struct OverlapOptions {
  int chunks = 4;  // per GEMM; fewer when a segment has fewer rows
  std::shared_ptr<CommThread> thread;
};

// x [B, T / t, K] (this rank's segment), w [N, K] -> [B, T, N].
Tensor gather_linear(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o);
// x [B, T, K_r], w [N, K_r] -> [B, T / t, N], the rank's segment of the sum over ranks.
Tensor linear_reduce_scatter(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o);
// x [..., K] replicated, w [N, K_r... ] -> [..., N]; the input gradient is all-reduced.
Tensor copy_linear(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o);
// x [..., K_r], w [N, K_r] -> [..., N] summed over ranks.
Tensor linear_allreduce(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o);

}  // namespace braid::parallel::tensor_parallel
