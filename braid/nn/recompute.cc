#include "braid/nn/recompute.h"

#include <algorithm>

#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/nn/dropout.h"
#include "braid/nn/sequential.h"
#include "braid/ops/autocast.h"
#include "braid/ops/dropout.h"

namespace braid::nn {

const char* name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::full: return "full";
    case Recompute::selective: return "selective";
  }
  return "?";
}

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::none;
  if (s == "full") return Recompute::full;
  if (s == "selective") return Recompute::selective;
  fail<ConfigError>("parallel.recompute = '{}' (known: none, full, selective)", s);
}

namespace {

// What a rerun must see as the first run saw it: the generators' positions
// and the autocast dtype (the backward runs outside the trainer's region).
class Replay {
 public:
  explicit Replay(std::vector<Generator*> generators) : autocast_(autocast_dtype()) {
    for (Generator* g : generators) saved_.emplace_back(g, g->state());
  }
  // Runs fn with the saved state, then puts the generators back where the
  // step has got to.
  template <class F>
  auto run(F&& fn) const {
    std::vector<Generator::State> now;
    for (const auto& [g, s] : saved_) {
      now.push_back(g->state());
      g->set_state(s);
    }
    struct Restore {
      const Replay& r;
      std::vector<Generator::State>& now;
      ~Restore() {
        for (size_t i = 0; i < r.saved_.size(); ++i) r.saved_[i].first->set_state(now[i]);
      }
    } restore{*this, now};
    Autocast region(autocast_);
    return fn();
  }

 private:
  std::vector<std::pair<Generator*, Generator::State>> saved_;
  DType autocast_;
};

// A new handle on `t`'s values, so a node can be attached to it without
// touching `t` (fn may return its input, or a view of it).
Tensor fresh_handle(const Tensor& t) { return t.detach().as_strided(t.shape(), t.strides(), t.offset()); }

// Makes `out` the result of node `name` over `x`; unlike record() it does so
// even when x needs no gradient (the node's work is the parameters' inside).
void attach(const char* name, const Tensor& x, const Tensor& out, autograd::BackwardFn fn) {
  if (x.requires_grad()) {
    autograd::record(name, {x}, out, std::move(fn));
    return;
  }
  std::vector<autograd::Edge> next(1);
  next[0].shape = x.shape();
  GradMeta& meta = out.grad_meta();
  meta.requires_grad = true;
  meta.grad_fn = std::make_shared<autograd::Node>(name, std::move(next), std::move(fn));
}

// The rerun's input: a leaf on x's values that collects x's gradient.
Tensor rerun_input(const Tensor& x) {
  Tensor x2 = x.detach();
  if (x.requires_grad()) x2.set_requires_grad(true);
  return x2;
}

// Back-propagates g through the rerun (the parameters inside accumulate
// their gradients and fire their grad-ready hooks here) and returns x's.
Tensor backward_through(const Tensor& x2, const Tensor& y2, const Tensor& g) {
  if (y2.requires_grad()) braid::backward(y2, g);
  return x2.requires_grad() ? x2.grad() : Tensor();
}

}  // namespace

Tensor checkpoint(const TensorFn& fn, const Tensor& x, std::vector<Generator*> generators, bool has_parameters) {
  if (!autograd::grad_enabled() || !(x.requires_grad() || has_parameters)) return fn(x);
  auto replay = std::make_shared<Replay>(std::move(generators));
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    y = fn(x);
  }
  Tensor out = fresh_handle(y);
  const Tensor saved = x.detach();
  const bool x_grad = x.requires_grad();
  attach("checkpoint", x, out, [fn, replay, saved, x_grad](const Tensor& g) {
    Tensor x2 = saved.detach();
    if (x_grad) x2.set_requires_grad(true);
    Tensor y2 = replay->run([&] {
      autograd::EnableGradGuard grad;
      return fn(x2);
    });
    return std::vector<Tensor>{backward_through(x2, y2, g)};
  });
  return out;
}

struct Rematerialized::State {
  TensorFn fn;
  Replay replay;
  Refill refill;
  Tensor x;        // fn's input (detached; requires_grad as x did)
  Tensor y;        // the first run's output, whose memory comes and goes
  Tensor x2, y2;   // the rerun under grad, for fn's backward
  bool released = false;
  bool releasable = false;  // y's memory is its own (not the input's or the consumer's)

  void rerun_with_graph() {
    if (y2.defined()) return;
    x2 = rerun_input(x);
    y2 = replay.run([&] {
      autograd::EnableGradGuard grad;
      return fn(x2);
    });
  }
  // Before the consumer's backward: y's values again.
  void refill_output() {
    if (!released) return;
    y.storage()->materialize();
    released = false;
    autograd::NoGradGuard no_grad;
    if (refill == Refill::keep_graph) {
      rerun_with_graph();
      y.copy_from(y2.detach());
    } else {
      y.copy_from(replay.run([&] { return fn(x); }));
    }
  }
  // The consumer's backward (newer) has run: nothing reads y's values any
  // more, though its node keeps the handle until the graph goes (the engine
  // frees no node before the end of backward).
  void release_output() {
    if (releasable && !y.storage()->released()) y.storage()->release();
  }
};

Rematerialized::Rematerialized(TensorFn fn, const Tensor& x, std::vector<Generator*> generators, Refill refill) {
  if (!autograd::grad_enabled() || !x.requires_grad()) {
    output_ = fn(x);
    return;
  }
  s_ = std::make_shared<State>(State{.fn = std::move(fn), .replay = Replay(std::move(generators)), .refill = refill,
                                     .x = rerun_input(x), .y = {}, .x2 = {}, .y2 = {}, .released = false,
                                     .releasable = false});
  {
    autograd::NoGradGuard no_grad;
    s_->y = s_->fn(x);
  }
  output_ = fresh_handle(s_->y);
  autograd::record("rematerialized", {x}, output_, [state = s_](const Tensor& g) {
    if (state->refill == Refill::rerun_twice) state->release_output();
    state->rerun_with_graph();
    Tensor gx = backward_through(state->x2, state->y2, g);
    state->release_output();
    state->x2 = state->y2 = state->y = Tensor();
    return std::vector<Tensor>{gx};
  });
}

Tensor Rematerialized::release_after(const Tensor& consumer_out) {
  if (!s_) return consumer_out;
  const std::shared_ptr<Storage>& mine = s_->y.storage();
  // Memory shared with the input (fn returned a view) or with the consumer's
  // output is still in use: keep it.
  const bool shared = !mine || mine->released() || mine == s_->x.storage() ||
                      (consumer_out.defined() && mine == consumer_out.storage());
  if (!shared) {
    mine->release();
    s_->released = s_->releasable = true;
  }
  if (!consumer_out.requires_grad()) return consumer_out;
  Tensor out = fresh_handle(consumer_out);
  autograd::record("refill_rematerialized", {consumer_out}, out, [state = s_](const Tensor& g) {
    state->refill_output();
    return std::vector<Tensor>{g};
  });
  return out;
}

std::vector<Generator*> dropout_generators(const Module& m) {
  std::vector<Generator*> out;
  auto visit = [&](auto&& self, const Module& mod) -> void {
    if (const auto* d = dynamic_cast<const Dropout*>(&mod)) {
      Generator* g = d->generator() ? d->generator() : &dropout_generator();
      if (std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
    }
    for (const auto& [n, c] : mod.children()) self(self, *c);
  };
  visit(visit, m);
  return out;
}

Tensor checkpoint_module(Module& m, const Tensor& x, const TensorFn& body) {
  bool has_parameters = false;
  for (const Tensor& p : m.parameters()) has_parameters = has_parameters || p.requires_grad();
  return checkpoint(body, x, dropout_generators(m), has_parameters);
}

Tensor rematerialize(Module& producer, const Tensor& x, const TensorFn& consumer) {
  Rematerialized r([&producer](const Tensor& v) { return producer.forward(v); }, x, dropout_generators(producer),
                   Refill::rerun_twice);
  return r.release_after(consumer(r.output()));
}

int64_t apply_recompute(Sequential& model, const RecomputeOptions& o) {
  int64_t seen = 0, set = 0;
  for (size_t i = 0; i < model.size(); ++i) {
    auto* r = dynamic_cast<Recomputable*>(&model[i]);
    if (!r) continue;
    const bool mine = o.layers <= 0 || seen < o.layers;
    r->set_recompute(mine ? o.mode : Recompute::none);
    ++seen;
    if (mine && o.mode != Recompute::none) ++set;
  }
  if (o.mode != Recompute::none && seen == 0) {
    fail<ConfigError>("parallel.recompute = {}: the model has no layer that recomputes (transformer blocks do)",
                      name(o.mode));
  }
  return set;
}

}  // namespace braid::nn
