// Convolution through oneDNN primitives (see conv.h).
//
// Primitives (and the reorders around them) are built once per geometry,
// pass, layout, precision and thread count, then cached (onednn.h). In bf16
// the products' inputs (x, w, dy) are bf16 and their results (y, dx, dw, db)
// and the bias f32: oneDNN accumulates in f32 and writes f32, so no result
// is rounded to bf16.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "braid/base/thread_pool.h"
#include "braid/tensor/cpu/conv.h"
#include "braid/tensor/cpu/onednn.h"
#include "braid/tensor/tensor.h"

namespace braid::cpu::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

enum class Pass : uint8_t { forward, backward_data, backward_weights };

struct Key {
  Pass pass;
  bool blocked, bias, bf16;
  int threads;
  int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  auto tie() const {
    return std::tie(pass, blocked, bias, bf16, threads, n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, groups);
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

struct Descs {
  memory::desc x, w, b, y;
  memory::dims strides, dilates, pad;
};

// braid's layouts of x, w and y in the given element types (b is always f32).
Descs plain_descs(const Conv2dGeometry& g, dt x, dt w, dt y) {
  Descs d;
  d.x = memory::desc({g.n, g.c, g.h, g.w}, x, tag::nchw);
  d.w = g.groups > 1 ? memory::desc({g.groups, g.o / g.groups, g.c / g.groups, g.kh, g.kw}, w, tag::goihw)
                     : memory::desc({g.o, g.c, g.kh, g.kw}, w, tag::oihw);
  d.b = memory::desc({g.o}, dt::f32, tag::x);
  d.y = memory::desc({g.n, g.o, g.oh(), g.ow()}, y, tag::nchw);
  d.strides = {g.stride_h, g.stride_w};
  d.dilates = {g.dil_h - 1, g.dil_w - 1};  // oneDNN counts dilation from 0
  d.pad = {g.pad_h, g.pad_w};
  return d;
}

memory::desc any_like(const memory::desc& d) { return memory::desc(d.dims(), d.data_type(), tag::any); }

Io make_io(int arg, bool output, const memory::desc& user, const memory::desc& inner) {
  Io io{arg, output, user, inner, std::nullopt};
  if (user != inner) {
    auto& e = engine();
    io.convert = output ? dnnl::reorder(dnnl::reorder::primitive_desc(e, inner, e, user))
                        : dnnl::reorder(dnnl::reorder::primitive_desc(e, user, e, inner));
  }
  return io;
}

std::shared_ptr<Cached> build(const Key& k, const Conv2dGeometry& g) {
  auto& eng = engine();
  // Each pass's inputs in the product's precision, its outputs in f32: the
  // forward reads x, w and writes y; backward-data reads dy, w and writes dx;
  // backward-weights reads x, dy and writes dw, db.
  const dt lp = k.bf16 ? dt::bf16 : dt::f32;
  const Descs d = k.pass == Pass::forward         ? plain_descs(g, lp, lp, dt::f32)
                  : k.pass == Pass::backward_data ? plain_descs(g, dt::f32, lp, lp)
                                                  : plain_descs(g, lp, dt::f32, lp);
  const memory::desc x = k.blocked ? any_like(d.x) : d.x;
  const memory::desc w = k.blocked ? any_like(d.w) : d.w;
  const memory::desc y = k.blocked ? any_like(d.y) : d.y;
  // The forward description every backward pass is built against.
  const Descs fd = plain_descs(g, lp, lp, dt::f32);
  const memory::desc fx = k.blocked ? any_like(fd.x) : fd.x;
  const memory::desc fw = k.blocked ? any_like(fd.w) : fd.w;
  const memory::desc fy = k.blocked ? any_like(fd.y) : fd.y;
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto algo = dnnl::algorithm::convolution_direct;
  auto fwd_desc = k.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, fx, fw,
                                                           d.b, fy, d.strides, d.dilates, d.pad, d.pad)
                         : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algo, fx, fw,
                                                           fy, d.strides, d.dilates, d.pad, d.pad);
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

std::shared_ptr<Cached> lookup(Pass pass, bool blocked, bool bias, bool bf16, const Conv2dGeometry& g) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<Cached>> cache;
  const Key k{pass, blocked, bias, bf16, num_threads(), g.n, g.c, g.h, g.w, g.o, g.kh, g.kw,
              g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w, g.groups};
  std::lock_guard lock(mu);
  auto it = cache.find(k);
  if (it == cache.end()) it = cache.emplace(k, build(k, g)).first;
  return it->second;
}

// Runs a cached pass on braid's plain buffers, keyed by oneDNN argument id.
void run(const Cached& c, const std::unordered_map<int, void*>& buffers) {
  auto& eng = engine();
  dnnl::stream& stream = onednn::stream();
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
void guarded(const char* pass, bool bf16, const Conv2dGeometry& g, Fn&& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    fail<ValueError>("conv2d ({}, oneDNN, {}): {} failed: {}", g.to_string(), bf16 ? "bf16" : "f32", pass, e.what());
  }
}

// The three passes on untyped buffers; the typed overloads below name them.
void forward_any(const Conv2dGeometry& g, bool blocked, bool bf16, const void* x, const void* w, const float* b,
                 float* y) {
  guarded("forward", bf16, g, [&] {
    run(*lookup(Pass::forward, blocked, b != nullptr, bf16, g),
        {{DNNL_ARG_SRC, const_cast<void*>(x)},
         {DNNL_ARG_WEIGHTS, const_cast<void*>(w)},
         {DNNL_ARG_BIAS, const_cast<float*>(b)},
         {DNNL_ARG_DST, y}});
  });
}

void backward_data_any(const Conv2dGeometry& g, bool blocked, bool bf16, const void* dy, const void* w, float* dx) {
  guarded("backward_data", bf16, g, [&] {
    run(*lookup(Pass::backward_data, blocked, false, bf16, g),
        {{DNNL_ARG_DIFF_DST, const_cast<void*>(dy)},
         {DNNL_ARG_WEIGHTS, const_cast<void*>(w)},
         {DNNL_ARG_DIFF_SRC, dx}});
  });
}

void backward_weights_any(const Conv2dGeometry& g, bool blocked, bool bf16, const void* dy, const void* x,
                          float* dw, float* db) {
  guarded("backward_weights", bf16, g, [&] {
    run(*lookup(Pass::backward_weights, blocked, db != nullptr, bf16, g),
        {{DNNL_ARG_SRC, const_cast<void*>(x)},
         {DNNL_ARG_DIFF_DST, const_cast<void*>(dy)},
         {DNNL_ARG_DIFF_WEIGHTS, dw},
         {DNNL_ARG_DIFF_BIAS, db}});
  });
}

}  // namespace

void forward(const Conv2dGeometry& g, bool blocked, const float* x, const float* w, const float* b, float* y) {
  forward_any(g, blocked, false, x, w, b, y);
}
void forward(const Conv2dGeometry& g, bool blocked, const bf16* x, const bf16* w, const float* b, float* y) {
  forward_any(g, blocked, true, x, w, b, y);
}
void backward_data(const Conv2dGeometry& g, bool blocked, const float* dy, const float* w, float* dx) {
  backward_data_any(g, blocked, false, dy, w, dx);
}
void backward_data(const Conv2dGeometry& g, bool blocked, const bf16* dy, const bf16* w, float* dx) {
  backward_data_any(g, blocked, true, dy, w, dx);
}
void backward_weights(const Conv2dGeometry& g, bool blocked, const float* dy, const float* x, float* dw,
                      float* db) {
  backward_weights_any(g, blocked, false, dy, x, dw, db);
}
void backward_weights(const Conv2dGeometry& g, bool blocked, const bf16* dy, const bf16* x, float* dw, float* db) {
  backward_weights_any(g, blocked, true, dy, x, dw, db);
}

}  // namespace braid::cpu::onednn
