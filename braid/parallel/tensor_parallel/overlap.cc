#include "braid/parallel/tensor_parallel/overlap.h"

#include <algorithm>

#include "braid/autograd/deferred.h"
#include "braid/autograd/node.h"
#include "braid/ops/linear.h"
#include "braid/ops/matmul.h"
#include "braid/ops/shape.h"
#include "braid/parallel/shard_spec.h"
#include "braid/parallel/tensor_parallel/collectives.h"

namespace braid::parallel::tensor_parallel {

using Grads = std::vector<Tensor>;

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommThread::drive(comm::Work w, Duration timeout) {
  {
    std::lock_guard lock(mu_);
    queue_.emplace_back(std::move(w), timeout);
  }
  cv_.notify_one();
}

void CommThread::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, nothing left
    auto [work, timeout] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      work.wait(Deadline::after(comm::collective_backstop(timeout)));
    } catch (...) {
      // The caller waits on the same Work and reports its error.
    }
    lock.lock();
  }
}

namespace {

struct Chunks {
  std::vector<std::pair<int64_t, int64_t>> ranges;  // rows [b, e) of a segment (or of all rows)
};

Chunks chunks_of(int64_t rows, int chunks) {
  Chunks c;
  const int k = static_cast<int>(std::clamp<int64_t>(chunks, 1, std::max<int64_t>(1, rows)));
  for (int j = 0; j < k; ++j) c.ranges.push_back(shard_range(rows, k, j));
  return c;
}

comm::Work started(comm::Work w, const comm::Communicator& tp, const OverlapOptions& o) {
  if (o.thread) o.thread->drive(w, tp.options().timeout);
  return w;
}

// The all-gathers over tp of each chunk of rows of x's sequence segment
// (x: [B, T / t, N], contiguous), all started: parts[j] becomes [t, B, c, N].
// The chunks sent and received stay alive here until each completes.
struct ChunkGathers {
  std::vector<Tensor> mine, parts;
  std::vector<comm::Work> works;
};
ChunkGathers start_chunk_gathers(const Tensor& x, const Chunks& c, const comm::Communicator& tp,
                                 const OverlapOptions& o) {
  ChunkGathers g;
  for (const auto& [b, e] : c.ranges) {
    g.mine.push_back(slice(x, 1, b, e).contiguous());
    g.parts.push_back(Tensor::empty({tp.size(), x.size(0), e - b, x.size(2)}, DType::f32));
    g.works.push_back(started(start_allgather(g.mine.back(), g.parts.back(), tp), tp, o));
  }
  return g;
}

void check_f32(const Tensor& x, const Tensor& w, const char* what) {
  if (x.dtype() != DType::f32 || w.dtype() != DType::f32) {
    fail<ValueError>("{}: the overlapped products take f32 (got {} and {})", what, name(x.dtype()), name(w.dtype()));
  }
}

Shape with(Shape s, size_t dim, int64_t v) {
  s[dim] = v;
  return s;
}

// Which of (x, w) a backward computes now: both, or under a pipeline that
// defers the weights' gradients (autograd/deferred.h) the part asked for, so
// dx's collectives are not repeated when dw is computed later.
std::pair<bool, bool> wanted(bool need_x, bool need_w) {
  const std::vector<uint8_t>* only = autograd::applying_only();
  return {need_x && (!only || (*only)[0]), need_w && (!only || (*only)[1])};
}

// [rows, N] x [N, K] -> dx rows; [rows, N]^T x [rows, K] -> dw: linear's backward products.
Tensor input_grad(const Tensor& g2, const Tensor& w) { return matmul(g2, w); }
Tensor weight_grad(const Tensor& g2, const Tensor& x2) { return matmul(transpose(g2, 0, 1), x2); }

}  // namespace

Tensor gather_linear(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o) {
  check_f32(x, w, "gather_linear");
  if (x.ndim() != 3) fail<ValueError>("gather_linear: expects [B, T / t, K], got {}", to_string(x.shape()));
  const int t = tp.size();
  const int64_t batch = x.size(0), seg = x.size(1), in = x.size(2), out = w.size(0);
  const Tensor xs = x.detach().contiguous(), wd = w.detach();
  const Chunks c = chunks_of(seg, o.chunks);
  ChunkGathers gathers = start_chunk_gathers(xs, c, tp, o);
  Tensor full = Tensor::empty({batch, seg * t, in}, DType::f32);
  Tensor y = Tensor::empty({batch, seg * t, out}, DType::f32);
  for (size_t j = 0; j < c.ranges.size(); ++j) {
    const auto [b, e] = c.ranges[j];
    finish(gathers.works[j], tp, "gather_linear all-gather");
    place_segment_rows(y, linear(gathers.parts[j], wd), b, e);  // [t, B, c, N]
    place_segment_rows(full, gathers.parts[j], b, e);
  }
  const bool grad_x = x.requires_grad(), grad_w = w.requires_grad();
  autograd::record("gather_linear", {x, w}, y, [=](const Tensor& g) {
    const auto [need_x, need_w] = wanted(grad_x, grad_w);
    const Tensor gs = g.contiguous();
    std::vector<Tensor> dparts, douts;
    std::vector<comm::Work> rs;
    if (need_x) {
      for (const auto& [b, e] : c.ranges) {
        const int64_t rows = t * batch * (e - b);
        dparts.push_back(input_grad(reshape(segment_rows(gs, t, b, e), {rows, out}), wd).contiguous());
        douts.push_back(Tensor::empty({batch, e - b, in}, DType::f32));
        rs.push_back(started(start_reduce_scatter(dparts.back(), douts.back(), tp), tp, o));
      }
    }
    // dw multiplies while the last reduce-scatters run.
    const int64_t rows = batch * seg * t;
    Tensor dw = need_w ? weight_grad(reshape(gs, {rows, out}), reshape(full, {rows, in})) : Tensor();
    Tensor dx;
    if (need_x) {
      dx = Tensor::empty({batch, seg, in}, DType::f32);
      for (size_t j = 0; j < c.ranges.size(); ++j) {
        finish(rs[j], tp, "gather_linear backward reduce-scatter");
        slice(dx, 1, c.ranges[j].first, c.ranges[j].second).copy_from(douts[j]);
      }
    }
    return Grads{dx, dw};
  });
  return y;
}

Tensor linear_reduce_scatter(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o) {
  check_f32(x, w, "linear_reduce_scatter");
  const int t = tp.size();
  if (x.ndim() != 3 || x.size(1) % t != 0) {
    fail<ValueError>("linear_reduce_scatter: expects [B, T, K] with T divisible by parallel.tensor = {}, got {}", t,
                     to_string(x.shape()));
  }
  const int64_t batch = x.size(0), seg = x.size(1) / t, in = x.size(2), out = w.size(0);
  const Tensor xs = x.detach().contiguous(), wd = w.detach();
  const Chunks c = chunks_of(seg, o.chunks);
  std::vector<Tensor> products, outs;
  std::vector<comm::Work> works;
  for (const auto& [b, e] : c.ranges) {
    products.push_back(linear(segment_rows(xs, t, b, e), wd));  // [t, B, c, N]
    outs.push_back(Tensor::empty({batch, e - b, out}, DType::f32));
    works.push_back(started(start_reduce_scatter(products.back(), outs.back(), tp), tp, o));
  }
  Tensor y = Tensor::empty({batch, seg, out}, DType::f32);
  for (size_t j = 0; j < c.ranges.size(); ++j) {
    finish(works[j], tp, "linear_reduce_scatter reduce-scatter");
    slice(y, 1, c.ranges[j].first, c.ranges[j].second).copy_from(outs[j]);
  }
  const bool grad_x = x.requires_grad(), grad_w = w.requires_grad();
  autograd::record("linear_reduce_scatter", {x, w}, y, [=](const Tensor& g) {
    const auto [need_x, need_w] = wanted(grad_x, grad_w);
    const Tensor gs = g.contiguous();
    ChunkGathers gathers = start_chunk_gathers(gs, c, tp, o);
    Tensor gfull = Tensor::empty({batch, seg * t, out}, DType::f32);
    Tensor dx = need_x ? Tensor::empty({batch, seg * t, in}, DType::f32) : Tensor();
    for (size_t j = 0; j < c.ranges.size(); ++j) {
      const auto [b, e] = c.ranges[j];
      finish(gathers.works[j], tp, "linear_reduce_scatter backward all-gather");
      if (need_x) {
        const Tensor d = input_grad(reshape(gathers.parts[j], {t * batch * (e - b), out}), wd);
        place_segment_rows(dx, reshape(d, {t, batch, e - b, in}), b, e);
      }
      place_segment_rows(gfull, gathers.parts[j], b, e);
    }
    const int64_t rows = batch * seg * t;
    Tensor dw = need_w ? weight_grad(reshape(gfull, {rows, out}), reshape(xs, {rows, in})) : Tensor();
    return Grads{dx, dw};
  });
  return y;
}

Tensor copy_linear(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o) {
  check_f32(x, w, "copy_linear");
  const Tensor xd = x.detach(), wd = w.detach();
  Tensor y = linear(xd, wd);
  const bool grad_x = x.requires_grad(), grad_w = w.requires_grad();
  autograd::record("copy_linear", {x, w}, y, [=](const Tensor& g) {
    const auto [need_x, need_w] = wanted(grad_x, grad_w);
    const int64_t in = xd.size(-1), out = wd.size(0), rows = in == 0 ? 0 : xd.numel() / in;
    const Tensor g2 = reshape(g.contiguous(), {rows, out});
    Tensor dx;
    comm::Work ar;
    if (need_x) {
      dx = input_grad(g2, wd).contiguous();
      if (tp.size() > 1) ar = started(start_allreduce(dx, tp), tp, o);
    }
    // dw multiplies while the input gradient is summed over the ranks.
    Tensor dw = need_w ? weight_grad(g2, reshape(xd.contiguous(), {rows, in})) : Tensor();
    if (need_x && tp.size() > 1) finish(ar, tp, "copy_linear backward all-reduce");
    return Grads{need_x ? reshape(dx, xd.shape()) : Tensor(), dw};
  });
  return y;
}

Tensor linear_allreduce(const Tensor& x, const Tensor& w, const comm::Communicator& tp, const OverlapOptions& o) {
  check_f32(x, w, "linear_allreduce");
  const int64_t in = x.size(-1), out = w.size(0), rows = in == 0 ? 0 : x.numel() / in;
  const Tensor x2 = reshape(x.detach().contiguous(), {rows, in}), wd = w.detach();
  const Chunks c = chunks_of(rows, o.chunks);
  std::vector<Tensor> products;
  std::vector<comm::Work> works;
  for (const auto& [b, e] : c.ranges) {
    products.push_back(linear(slice(x2, 0, b, e), wd));
    if (tp.size() > 1) works.push_back(started(start_allreduce(products.back(), tp), tp, o));
  }
  Tensor y = Tensor::empty({rows, out}, DType::f32);
  for (size_t j = 0; j < c.ranges.size(); ++j) {
    if (tp.size() > 1) finish(works[j], tp, "linear_allreduce all-reduce");
    slice(y, 0, c.ranges[j].first, c.ranges[j].second).copy_from(products[j]);
  }
  y = reshape(y, with(x.shape(), x.ndim() - 1, out));
  const bool grad_x = x.requires_grad(), grad_w = w.requires_grad();
  autograd::record("linear_allreduce", {x, w}, y, [=, xshape = x.shape()](const Tensor& g) {
    const auto [need_x, need_w] = wanted(grad_x, grad_w);
    const Tensor g2 = reshape(g.contiguous(), {rows, out});
    return Grads{need_x ? reshape(input_grad(g2, wd), xshape) : Tensor(), need_w ? weight_grad(g2, x2) : Tensor()};
  });
  return y;
}

}  // namespace braid::parallel::tensor_parallel
