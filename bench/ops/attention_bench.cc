// Forward+backward time of causal attention in braid, one configuration per
// process (bench/ops/attention_vs_torch.py runs it beside PyTorch, alternating):
//
//   fused:    scaled_dot_product_attention on q, k, v that are slices of one
//             packed [B, T, 3 H D] projection viewed as [B, T, H, D] (how the
//             GPT calls it), each a leaf.
//   composed: the path it replaces (nn::attend): q, k, v [B H, T, D]
//             contiguous leaves, matmul(q, k^T) * scale, masked_fill of the
//             future with -inf, softmax, matmul with v. (The copies attend makes
//             to reach that layout are not timed: the composed path's best case.)
//
//   attention_bench --impl fused|composed --b 8 --h 6 --t 256 --d 64 --threads 1
//                   [--iters 5] [--warmup 2] [--tq T] [--dropout P] [--forward-only 1]
//
// --tq: fewer queries than keys (fused only: T keys, the last tq queries, as
// one decoding step or a chunk of a prefill); --dropout: on the attention
// weights (fused only); --forward-only: no backward, no gradients (generation).
//
// Prints one JSON line: the configuration, each timed iteration's seconds
// (forward, then backward with a fixed random output gradient), wall and
// process CPU (on a shared machine the CPU time of a 1-thread run is what
// time-slicing by other processes does not inflate), and the peak bytes the
// caching allocator held above what was in use before the first iteration.
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/base/rng.h"
#include "braid/base/thread_pool.h"
#include "braid/ops/activation.h"
#include "braid/ops/attention.h"
#include "braid/ops/elementwise.h"
#include "braid/ops/matmul.h"
#include "braid/ops/shape.h"
#include "braid/ops/softmax.h"

namespace braid {
namespace {

struct Config {
  std::string impl = "fused";
  int64_t b = 8, h = 6, t = 256, d = 64;
  int64_t tq = 0;  // 0: t
  double dropout = 0;
  bool forward_only = false;
  int threads = 1, iters = 5, warmup = 2;
};

Tensor uniform(const Shape& shape, Generator& gen) {
  Tensor t = Tensor::empty(shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = gen.uniform() * 2.f - 1.f;
  return t;
}

Tensor leaf(const Tensor& t) {
  Tensor l = t.detach();
  l.set_requires_grad();
  return l;
}

int run(const Config& c) {
  set_num_threads(c.threads);
  Generator gen(1);
  std::vector<Tensor> leaves;
  Tensor grad_out;
  std::function<Tensor()> forward;
  const int64_t tq = c.tq > 0 ? c.tq : c.t;
  Generator drops(2);
  if (c.impl == "fused") {
    const int64_t w = 3 * c.h * c.d;
    const Tensor qkv = uniform({c.b, c.t, w}, gen);
    const Shape strides{c.t * w, w, c.d, 1};
    // The last tq positions' queries.
    leaves.push_back(leaf(qkv.as_strided({c.b, tq, c.h, c.d}, strides, (c.t - tq) * w)));
    for (int64_t i = 1; i < 3; ++i) leaves.push_back(leaf(qkv.as_strided({c.b, c.t, c.h, c.d}, strides, i * c.h * c.d)));
    grad_out = uniform({c.b, tq, c.h, c.d}, gen);
    forward = [&] {
      return scaled_dot_product_attention(leaves[0], leaves[1], leaves[2], {.dropout = c.dropout, .generator = &drops});
    };
  } else if (c.impl == "composed") {
    if (tq != c.t || c.dropout != 0) {
      std::fprintf(stderr, "attention_bench: --tq and --dropout are for --impl fused\n");
      return 2;
    }
    for (int i = 0; i < 3; ++i) leaves.push_back(leaf(uniform({c.b * c.h, c.t, c.d}, gen)));
    grad_out = uniform({c.b * c.h, c.t, c.d}, gen);
    Tensor mask = Tensor::zeros({c.t, c.t}, DType::b8);
    bool* m = mask.data<bool>();
    for (int64_t i = 0; i < c.t; ++i) {
      for (int64_t j = i + 1; j < c.t; ++j) m[i * c.t + j] = true;
    }
    const double scale = 1 / std::sqrt(static_cast<double>(c.d));
    forward = [&, mask, scale] {
      Tensor s = mul(matmul(leaves[0], transpose(leaves[1], 1, 2)), scale);
      return matmul(softmax(masked_fill(s, mask, -INFINITY), -1), leaves[2]);
    };
  } else {
    std::fprintf(stderr, "attention_bench: --impl must be fused or composed, got %s\n", c.impl.c_str());
    return 2;
  }
  CachingAllocator& alloc = CachingAllocator::host();
  const size_t before = alloc.stats().bytes_in_use;
  alloc.reset_peak();
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  std::vector<double> times, cpu;
  for (int i = 0; i < c.warmup + c.iters; ++i) {
    for (Tensor& l : leaves) l.set_grad(Tensor());
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    if (c.forward_only) {
      autograd::NoGradGuard no_grad;
      forward();
    } else {
      autograd::backward(forward(), grad_out);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i >= c.warmup) {
      times.push_back(s);
      cpu.push_back(cpu_now() - c0);
    }
  }
  const size_t peak = alloc.stats().peak_bytes_in_use - before;
  auto list = [](const std::vector<double>& v) {
    std::string out;
    for (double s : v) out += (out.empty() ? "" : ", ") + std::to_string(s);
    return out;
  };
  std::printf(
      "{\"impl\": \"%s\", \"b\": %lld, \"h\": %lld, \"t\": %lld, \"tq\": %lld, \"d\": %lld, \"threads\": %d, "
      "\"dropout\": %g, \"forward_only\": %d, \"seconds\": [%s], \"cpu_seconds\": [%s], \"peak_bytes\": %zu}\n",
      c.impl.c_str(), static_cast<long long>(c.b), static_cast<long long>(c.h), static_cast<long long>(c.t),
      static_cast<long long>(tq), static_cast<long long>(c.d), c.threads, c.dropout, c.forward_only ? 1 : 0,
      list(times).c_str(), list(cpu).c_str(), peak);
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  braid::Config c;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const char* value = argv[i + 1];
    if (key == "--impl") {
      c.impl = value;
    } else if (key == "--b") {
      c.b = std::atoll(value);
    } else if (key == "--h") {
      c.h = std::atoll(value);
    } else if (key == "--t") {
      c.t = std::atoll(value);
    } else if (key == "--d") {
      c.d = std::atoll(value);
    } else if (key == "--threads") {
      c.threads = std::atoi(value);
    } else if (key == "--iters") {
      c.iters = std::atoi(value);
    } else if (key == "--warmup") {
      c.warmup = std::atoi(value);
    } else if (key == "--tq") {
      c.tq = std::atoll(value);
    } else if (key == "--dropout") {
      c.dropout = std::atof(value);
    } else if (key == "--forward-only") {
      c.forward_only = std::atoi(value) != 0;
    } else {
      std::fprintf(stderr, "attention_bench: unknown option %s\n", key.c_str());
      return 2;
    }
  }
  try {
    return braid::run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 1;
  }
}
