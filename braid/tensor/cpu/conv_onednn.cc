// Convolution through oneDNN primitives (see conv.h).
//
// Primitives (and the reorders around them) are built once per geometry,
// pass, layout and thread count, then cached: building one costs far more
// than running it on these shapes. Scratchpads are user-managed (allocated per
// call from braid's caching allocator), so concurrent calls from several
// threads never share one.
#include <dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/tensor.h"

namespace braid::cpu::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

enum class Pass : uint8_t { forward, backward_data, backward_weights };

struct Key {
  Pass pass;
  bool blocked, bias;
  int threads;
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  auto tie() const {
    return std::tie(pass, blocked, bias, threads, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups);
  }
  bool operator<(const Key& k) const { return tie() < k.tie(); }
};

// One argument of a cached primitive: braid's plain layout, the primitive's
// layout, and the reorder between them when they differ.
struct Io {
  int arg;
  bool output;
  memory::desc user, inner;
  std::optional<dnnl::reorder> convert;  // user -> inner for inputs, inner -> user for outputs
};

struct Cached {
  dnnl::primitive prim;
  memory::desc scratchpad;
  std::vector<Io> io;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Descs {
  memory::desc x, w, b, y;
  memory::dims strides, dilates, pad;
};

Descs plain_descs(const Conv2dGeometry& g) {
  Descs d;
  d.x = memory::desc({g.n, g.c, g.h, g.w}, kF32, tag::nchw);
  d.w = g.groups > 1 ? memory::desc({g.groups, g.o / g.groups, g.c / g.groups, g.kh, g.kw}, kF32, tag::goihw)
                     : memory::desc({g.o, g.c, g.kh, g.kw}, kF32, tag::oihw);
  d.b = memory::desc({g.o}, kF32, tag::x);
  d.y = memory::desc({g.n, g.o, g.oh(), g.ow()}, kF32, tag::nchw);
  d.strides = {g.stride_h, g.stride_w};
  d.dilates = {g.dil_h - 1, g.dil_w - 1};  // oneDNN counts dilation from 0
  d.pad = {g.pad_h, g.pad_w};
  return d;
}

memory::desc any_like(const memory::desc& d) { return memory::desc(d.dims(), kF32, tag::any); }

Io make_io(int arg, bool output, const memory::desc& user, const memory::desc& inner) {
  Io io{arg, output, user, inner, std::nullopt};
  if (user != inner) {
    auto& e = cpu_engine();
    io.convert = output ? dnnl::reorder(dnnl::reorder::primitive_desc(e, inner, e, user))
                        : dnnl::reorder(dnnl::reorder::primitive_desc(e, user, e, inner));
  }
  return io;
}

std::shared_ptr<Cached> build(const Key& k, const Conv2dGeometry& g) {
  auto& eng = cpu_engine();
  const Descs d = plain_descs(g);
  const memory::desc x = k.blocked ? any_like(d.x) : d.x;
  const memory::desc w = k.blocked ? any_like(d.w) : d.w;
  const memory::desc y = k.blocked ? any_like(d.y) : d.y;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto algo = dnnl::algorithm::convolution_direct;
  auto fwd_desc = k.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, x, w,
                                                           d.b, y, d.strides, d.dilates, d.pad, d.pad)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, x, w,
                                                           y, d.strides, d.dilates, d.pad, d.pad);
  dnnl::convolution_forward::primitive_desc fwd_pd(fwd_desc, attr, eng);
  auto c = std::make_shared<Cached>();
  switch (k.pass) {
    case Pass::forward:
      c->prim = dnnl::convolution_forward(fwd_pd);
      c->scratchpad = fwd_pd.scratchpad_desc();
      c->io.push_back(make_io(DNNL_ARG_SRC, false, d.x, fwd_pd.src_desc()));
      c->io.push_back(make_io(DNNL_ARG_WEIGHTS, false, d.w, fwd_pd.weights_desc()));
      if (k.bias) c->io.push_back(make_io(DNNL_ARG_BIAS, false, d.b, fwd_pd.bias_desc()));
      c->io.push_back(make_io(DNNL_ARG_DST, true, d.y, fwd_pd.dst_desc()));
      break;
    case Pass::backward_data: {
      dnnl::convolution_backward_data::desc desc(algo, x, w, y, d.strides, d.dilates, d.pad, d.pad);
      dnnl::convolution_backward_data::primitive_desc pd(desc, attr, eng, fwd_pd);
      c->prim = dnnl::convolution_backward_data(pd);
      c->scratchpad = pd.scratchpad_desc();
      c->io.push_back(make_io(DNNL_ARG_DIFF_DST, false, d.y, pd.diff_dst_desc()));
      c->io.push_back(make_io(DNNL_ARG_WEIGHTS, false, d.w, pd.weights_desc()));
      c->io.push_back(make_io(DNNL_ARG_DIFF_SRC, true, d.x, pd.diff_src_desc()));
      break;
    }
    case Pass::backward_weights: {
      auto desc = k.bias ? dnnl::convolution_backward_weights::desc(algo, x, w, d.b, y, d.strides, d.dilates,
                                                                    d.pad, d.pad)
                         : dnnl::convolution_backward_weights::desc(algo, x, w, y, d.strides, d.dilates,
                                                                    d.pad, d.pad);
      dnnl::convolution_backward_weights::primitive_desc pd(desc, attr, eng, fwd_pd);
      c->prim = dnnl::convolution_backward_weights(pd);
      c->scratchpad = pd.scratchpad_desc();
      c->io.push_back(make_io(DNNL_ARG_SRC, false, d.x, pd.src_desc()));
      c->io.push_back(make_io(DNNL_ARG_DIFF_DST, false, d.y, pd.diff_dst_desc()));
      c->io.push_back(make_io(DNNL_ARG_DIFF_WEIGHTS, true, d.w, pd.diff_weights_desc()));
      if (k.bias) c->io.push_back(make_io(DNNL_ARG_DIFF_BIAS, true, d.b, pd.diff_bias_desc()));
      break;
    }
  }
  return c;
}

std::shared_ptr<Cached> lookup(Pass pass, bool blocked, bool bias, const Conv2dGeometry& g) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<Cached>> cache;
  const Key k{pass, blocked, bias, num_threads(), g.n, g.c, g.h, g.w, g.o, g.kh, g.kw,
              g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups};
  std::lock_guard lock(mu);
  auto it = cache.find(k);
  if (it == cache.end()) it = cache.emplace(k, build(k, g)).first;
  return it->second;
}

// A buffer of `bytes` from the caching allocator, kept alive by `keep`.
void* scratch(size_t bytes, std::vector<Tensor>& keep) {
  keep.push_back(Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8));
  return keep.back().raw_data();
}

// Runs a cached pass on braid's plain buffers, keyed by oneDNN argument id.
void run(const Cached& c, const std::unordered_map<int, void*>& buffers) {
  auto& eng = cpu_engine();
  thread_local dnnl::stream stream(eng);
  std::vector<Tensor> keep;
  std::unordered_map<int, memory> args;
  std::vector<std::pair<const Io*, memory>> outputs;  // (io, user memory) to reorder back
  for (const Io& io : c.io) {
    memory user(io.user, eng, buffers.at(io.arg));
    if (!io.convert) {
      args.emplace(io.arg, user);
      continue;
    }
    memory inner(io.inner, eng, scratch(io.inner.get_size(), keep));
    if (io.output) {
      outputs.emplace_back(&io, user);
    } else {
      io.convert->execute(stream, user, inner);
    }
    args.emplace(io.arg, inner);
  }
  if (c.scratchpad.get_size() > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(c.scratchpad, eng, scratch(c.scratchpad.get_size(), keep)));
  }
  c.prim.execute(stream, args);
  for (auto& [io, user] : outputs) io->convert->execute(stream, args.at(io->arg), user);
  stream.wait();
}

template <class Fn>
void guarded(const char* pass, const Conv2dGeometry& g, Fn&& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    fail<ValueError>("conv2d ({}, oneDNN): {} failed: {}", g.to_string(), pass, e.what());
  }
}

}  // namespace

void forward(const Conv2dGeometry& g, bool blocked, const float* x, const float* w, const float* b,
             float* y) {
  guarded("forward", g, [&] {
    run(*lookup(Pass::forward, blocked, b != nullptr, g),
        {{DNNL_ARG_SRC, const_cast<float*>(x)},
         {DNNL_ARG_WEIGHTS, const_cast<float*>(w)},
         {DNNL_ARG_BIAS, const_cast<float*>(b)},
         {DNNL_ARG_DST, y}});
  });
}

void backward_data(const Conv2dGeometry& g, bool blocked, const float* dy, const float* w, float* dx) {
  guarded("backward_data", g, [&] {
    run(*lookup(Pass::backward_data, blocked, false, g),
        {{DNNL_ARG_DIFF_DST, const_cast<float*>(dy)},
         {DNNL_ARG_WEIGHTS, const_cast<float*>(w)},
         {DNNL_ARG_DIFF_SRC, dx}});
  });
}

void backward_weights(const Conv2dGeometry& g, bool blocked, const float* dy, const float* x,
                      float* dw, float* db) {
  guarded("backward_weights", g, [&] {
    run(*lookup(Pass::backward_weights, blocked, db != nullptr, g),
        {{DNNL_ARG_SRC, const_cast<float*>(x)},
         {DNNL_ARG_DIFF_DST, const_cast<float*>(dy)},
         {DNNL_ARG_DIFF_WEIGHTS, dw},
         {DNNL_ARG_DIFF_BIAS, db}});
  });
}

}  // namespace braid::cpu::onednn
