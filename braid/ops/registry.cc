#include "braid/ops/registry.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "braid/autograd/deferred.h"
#include "braid/autograd/engine.h"
#include "braid/autograd/node.h"
#include "braid/ops/families.h"
#include "braid/ops/tensor_ops.h"

namespace braid::op {

// ---- Attrs ----

Attrs::Attrs(std::initializer_list<std::pair<std::string_view, AttrValue>> items) {
  for (const auto& [k, v] : items) set(k, v);
}

Attrs& Attrs::set(std::string_view key, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == key) {
      v = std::move(value);
      return *this;
    }
  }
  items_.emplace_back(std::string(key), std::move(value));
  return *this;
}

bool Attrs::has(std::string_view key) const {
  return std::any_of(items_.begin(), items_.end(), [&](const auto& kv) { return kv.first == key; });
}

const AttrValue& Attrs::get(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return v;
  }
  fail<ValueError>("attribute '{}' is not set (attributes: {})", key, to_string());
}

namespace {
template <class T>
const T& typed(const AttrValue& v, std::string_view key, const char* type) {
  if (const T* p = std::get_if<T>(&v)) return *p;
  fail<ValueError>("attribute '{}' is not {}", key, type);
}
}  // namespace

int64_t Attrs::i(std::string_view key) const { return typed<int64_t>(get(key), key, "an integer"); }
double Attrs::f(std::string_view key) const {
  const AttrValue& v = get(key);
  if (const int64_t* p = std::get_if<int64_t>(&v)) return static_cast<double>(*p);
  return typed<double>(v, key, "a number");
}
const std::vector<int64_t>& Attrs::ints(std::string_view key) const {
  return typed<std::vector<int64_t>>(get(key), key, "a list of integers");
}
const std::string& Attrs::s(std::string_view key) const { return typed<std::string>(get(key), key, "a string"); }

std::string Attrs::to_string() const {
  std::string out;
  for (const auto& [k, v] : items_) {
    if (!out.empty()) out += ", ";
    out += k + "=";
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            out += fmt::format("{}", x);
          } else if constexpr (std::is_same_v<T, double>) {
            out += fmt::format("{:.17g}", x);
          } else if constexpr (std::is_same_v<T, std::string>) {
            out += x;
          } else {
            out += fmt::format("[{}]", fmt::join(x, ", "));
          }
        },
        v);
  }
  return out;
}

size_t Attrs::hash() const {
  size_t h = items_.size();
  auto mix = [&](size_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  for (const auto& [k, v] : items_) {
    mix(std::hash<std::string>{}(k));
    mix(v.index());
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            for (int64_t e : x) mix(std::hash<int64_t>{}(e));
          } else {
            mix(std::hash<T>{}(x));
          }
        },
        v);
  }
  return h;
}

// ---- the registry ----

namespace {

struct Registry {
  std::mutex mutex;  // define() from other layers may race with lookups
  std::vector<std::unique_ptr<OpDef>> owned;
  std::vector<const OpDef*> ops;
  std::unordered_map<std::string_view, const OpDef*> by_name;

  void add(OpDef def) {
    if (def.name.empty() || !def.infer || def.kernels.empty()) {
      fail<Error>("op registry: op '{}' needs a name, an inference rule and a kernel", def.name);
    }
    if (by_name.count(def.name)) fail<Error>("op registry: '{}' is registered twice", def.name);
    if (def.effect == Effect::inplace && def.mutates.size() != static_cast<size_t>(def.outputs)) {
      fail<Error>("op registry: in-place op '{}' must name the input behind each output", def.name);
    }
    owned.push_back(std::make_unique<OpDef>(std::move(def)));
    ops.push_back(owned.back().get());
    by_name[owned.back()->name] = owned.back().get();
  }
};

using Installer = std::function<void(const KernelAdder&)>;

struct Installers {
  std::mutex mutex;
  std::vector<Installer> pending;
  std::function<void(const Installer&)> run;  // set once the registry exists
};

Installers& installers() {
  static Installers* i = new Installers;
  return *i;
}

KernelAdder adder_for(Registry* reg) {
  return [reg](std::string_view name, KernelEntry entry) {
    auto it = reg->by_name.find(name);
    if (it == reg->by_name.end()) fail<Error>("op registry: kernels for '{}', which is not an op", name);
    const_cast<OpDef*>(it->second)->kernels.push_back(std::move(entry));
  };
}

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    Definer define = [reg](OpDef def) { reg->add(std::move(def)); };
    define_ops(define);
    {
      Installers& in = installers();
      std::lock_guard lock(in.mutex);
      for (const Installer& install : in.pending) install(adder_for(reg));
      in.pending.clear();
      in.run = [reg](const Installer& install) {
        std::lock_guard lock(reg->mutex);
        install(adder_for(reg));
      };
    }
    // The engine sums, copies and converts gradients through ops from now on
    // (it sits below this layer and cannot call them itself), so a captured
    // backward pass records its accumulation too. Any backward pass runs after
    // some op has been called, so after this.
    autograd::set_grad_arithmetic({.add_into = &accumulate_, .copy_into = &copy_, .clone = &clone, .cast = &cast});
    return reg;
  }();
  return *r;
}

thread_local CallObserver* t_observer = nullptr;
thread_local int t_placement = 0;

bool any_meta(std::span<const Tensor> inputs) {
  return std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.defined() && t.is_meta(); });
}

// A 0-dim host tensor: a scalar that may join tensors of any device (as in
// PyTorch), moved to theirs before the kernel runs.
bool host_scalar(const Tensor& t) { return t.defined() && t.device().is_cpu() && t.ndim() == 0; }

// The one device of the defined inputs (cpu when there are none).
Device device_of(const OpDef& op, std::span<const Tensor> inputs) {
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs) {
    if (!t.defined() || host_scalar(t)) continue;
    if (first == nullptr) {
      first = &t;
    } else if (t.device() != first->device()) {
      fail<ValueError>("{}: inputs on {} and {} (move them to one device with Tensor::to)", op.name,
                       name(first->device()), name(t.device()));
    }
  }
  return first == nullptr ? Device::cpu : first->device();
}

const Kernel& kernel_for(const OpDef& op, Device device, std::span<const Tensor> inputs);

// Runs the kernel of the inputs' device.
std::vector<Tensor> run_kernel(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  const Device device = device_of(op, inputs);
  const Kernel& kernel = kernel_for(op, device, inputs);
  if (device.is_cpu() || std::none_of(inputs.begin(), inputs.end(), host_scalar)) return kernel(Args{inputs, attrs});
  std::vector<Tensor> moved(inputs.begin(), inputs.end());
  for (Tensor& t : moved) {
    if (host_scalar(t)) t = t.to(device);
  }
  return kernel(Args{moved, attrs});
}

const Kernel& kernel_for(const OpDef& op, Device device, std::span<const Tensor> inputs) {
  const int di = op.dtype_input;
  const bool has_dtype = di < static_cast<int>(inputs.size()) && inputs[di].defined();
  std::string offered;
  for (const KernelEntry& k : op.kernels) {
    if (k.device.type != device.type) continue;
    if (k.dtypes.empty() || !has_dtype || std::find(k.dtypes.begin(), k.dtypes.end(), inputs[di].dtype()) != k.dtypes.end()) {
      return k.fn;
    }
    for (DType d : k.dtypes) offered += (offered.empty() ? "" : ", ") + std::string(name(d));
  }
  // A view's meta kernel only computes strides: it serves every device.
  if (op.effect == Effect::view && offered.empty()) {
    for (const KernelEntry& k : op.kernels) {
      if (k.device.type == DeviceType::meta) return k.fn;
    }
  }
  if (offered.empty()) fail<ValueError>("{}: no kernel for the {} device", op.name, name(device.type));
  fail<ValueError>("{}: dtype {} is not supported (input of shape {}; {} kernels take {})", op.name,
                   name(inputs[di].dtype()), to_string(inputs[di].shape()), name(device.type), offered);
}

// Outputs on the meta device: the op's own meta kernel when it has one (views
// compute their strides), else fresh tensors of the inferred shapes.
std::vector<Tensor> run_meta(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  for (const KernelEntry& k : op.kernels) {
    if (k.device.type == DeviceType::meta) return k.fn(Args{inputs, attrs});
  }
  if (op.effect == Effect::inplace) {
    std::vector<Tensor> out;
    for (int i : op.mutates) out.push_back(inputs[i]);
    return out;
  }
  std::vector<TensorMeta> in;
  for (const Tensor& t : inputs) in.push_back(meta_of(t));
  std::vector<Tensor> out;
  for (const TensorMeta& m : op.infer(in, attrs)) {
    out.push_back(m.absent ? Tensor() : Tensor::empty(m.shape, m.dtype, Device::meta));
  }
  return out;
}

// What the autograd node keeps: only the tensors the backward rule reads.
struct Saved {
  const OpDef* op;
  int placement;
  Attrs attrs;
  std::vector<Tensor> inputs;
  std::vector<TensorMeta> input_meta;
  std::vector<Tensor> outputs;
  std::vector<uint8_t> wants;
};

std::shared_ptr<const Saved> record(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs,
                                    const std::vector<Tensor>& outputs) {
  if (op.effect == Effect::inplace) {
    fail<ValueError>("{}: an in-place op cannot write a tensor that requires gradients", op.name);
  }
  auto s = std::make_shared<Saved>();
  s->op = &op;
  s->placement = t_placement;
  s->attrs = attrs;
  s->inputs.resize(inputs.size());
  s->input_meta.resize(inputs.size());
  s->wants.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    s->input_meta[i] = meta_of(inputs[i]);
    if (!inputs[i].defined()) continue;
    s->wants[i] = inputs[i].requires_grad() ? 1 : 0;
    if (op.save_inputs >> i & 1u) s->inputs[i] = inputs[i].detach();
  }
  s->outputs.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (op.save_outputs >> i & 1u) s->outputs[i] = outputs[i].detach();
  }
  std::vector<Tensor> in(inputs.begin(), inputs.end());
  autograd::record(op.name.c_str(), in, outputs[0], [s](const Tensor& g) {
    Placement hint(s->placement);
    // A backward split in two (autograd/deferred.h) asks for some inputs only.
    std::vector<uint8_t> some;
    if (const std::vector<uint8_t>* only = autograd::applying_only()) {
      some = s->wants;
      for (size_t i = 0; i < some.size() && i < only->size(); ++i) some[i] &= (*only)[i];
    }
    const std::vector<uint8_t>& wants = autograd::applying_only() ? some : s->wants;
    GradArgs args{s->inputs, s->input_meta, s->outputs, s->attrs, g, wants};
    std::vector<Tensor> grads = s->op->backward(args);
    grads.resize(s->inputs.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!wants[i]) grads[i] = Tensor();
    }
    return grads;
  });
  return s;
}

// While a kernel runs, nothing it does is recorded or observed: a kernel is
// one step of the graph, whatever it calls inside.
class KernelScope {
 public:
  KernelScope() : observer_(t_observer) { t_observer = nullptr; }
  ~KernelScope() { t_observer = observer_; }

 private:
  CallObserver* observer_;
  autograd::NoGradGuard no_grad_;
};

}  // namespace

const std::vector<const OpDef*>& all() { return registry().ops; }

void on_registry_ready(std::function<void(const KernelAdder& add)> install) {
  Installers& in = installers();
  std::unique_lock lock(in.mutex);
  if (!in.run) {
    in.pending.push_back(std::move(install));
    return;
  }
  auto run = in.run;
  lock.unlock();
  run(install);
}

const OpDef& define(OpDef def) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.add(std::move(def));
  return *r.ops.back();
}

int placement() { return t_placement; }
Placement::Placement(int hint) : previous_(t_placement) { t_placement = hint; }
Placement::~Placement() { t_placement = previous_; }

const OpDef* find_or_null(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second;
}

const OpDef& find(std::string_view name) {
  if (const OpDef* op = find_or_null(name)) return *op;
  std::string near;
  for (const OpDef* op : all()) {
    if (op->name.find(name) != std::string::npos || name.find(op->name) != std::string::npos) {
      near += (near.empty() ? "" : ", ") + op->name;
    }
  }
  fail<ValueError>("no op named '{}'{}", name, near.empty() ? "" : " (did you mean: " + near + "?)");
}

TensorMeta meta_of(const Tensor& t) { return t.defined() ? TensorMeta{t.shape(), t.dtype()} : TensorMeta{{}, DType::f32, true}; }

std::vector<Tensor> call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  if (op.inputs >= 0 && static_cast<int>(inputs.size()) != op.inputs) {
    fail<ValueError>("{}: takes {} tensor inputs, got {}", op.name, op.inputs, inputs.size());
  }
  std::vector<Tensor> outputs;
  {
    KernelScope scope;
    outputs = any_meta(inputs) ? run_meta(op, inputs, attrs) : run_kernel(op, inputs, attrs);
  }
  if (static_cast<int>(outputs.size()) != op.outputs) {
    fail<Error>("{}: the kernel returned {} outputs, the op has {}", op.name, outputs.size(), op.outputs);
  }
  std::shared_ptr<const Saved> saved;
  if (op.backward && autograd::needs_grad(inputs)) saved = record(op, inputs, attrs, outputs);
  if (CallObserver* observer = t_observer) {
    t_observer = nullptr;
    try {
      observer->on_call(op, attrs, inputs, outputs);
      // What the backward rule will read are detached handles of these
      // tensors: the observer must know them as the same values.
      if (saved) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (saved->inputs[i].defined()) observer->on_alias(saved->inputs[i], inputs[i]);
        }
        for (size_t i = 0; i < outputs.size(); ++i) {
          if (saved->outputs[i].defined()) observer->on_alias(saved->outputs[i], outputs[i]);
        }
      }
    } catch (...) {
      t_observer = observer;
      throw;
    }
    t_observer = observer;
  }
  return outputs;
}

std::vector<Tensor> call(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  return call(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

Tensor call1(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs) {
  return std::move(call(op, inputs, attrs)[0]);
}

Tensor call1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs) {
  return std::move(call(op, inputs, attrs)[0]);
}

Cost cost_of(const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& attrs) {
  if (op.cost) return op.cost(in, out, attrs);
  Cost c;
  for (const TensorMeta& m : in) c.bytes += static_cast<double>(numel(m.shape) * itemsize(m.dtype));
  for (const TensorMeta& m : out) c.bytes += static_cast<double>(numel(m.shape) * itemsize(m.dtype));
  c.flops = out.empty() ? 0 : static_cast<double>(numel(out[0].shape));
  return c;
}

ObserveCalls::ObserveCalls(CallObserver* observer) : previous_(t_observer) { t_observer = observer; }
ObserveCalls::~ObserveCalls() { t_observer = previous_; }

}  // namespace braid::op
