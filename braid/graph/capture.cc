#include "braid/graph/capture.h"

#include "braid/autograd/node.h"

namespace braid::graph {

namespace {
// A tensor's identity: its autograd state lives in the shared implementation,
// so the state's address is the same for every handle of the tensor and
// differs between tensors (views included).
const void* identity(const Tensor& t) { return &t.grad_meta(); }

std::string meta_text(const Tensor& t) { return fmt::format("{} {}", name(t.dtype()), to_string(t.shape())); }

}  // namespace

class Capture::Observer : public op::CallObserver {
 public:
  explicit Observer(Capture* c) : capture_(c) {}
  void on_call(const op::OpDef& op, const op::Attrs& attrs, std::span<const Tensor> inputs,
               std::span<const Tensor> outputs) override {
    capture_->on_call(op, attrs, inputs, outputs);
  }
  void on_alias(const Tensor& alias, const Tensor& of) override { capture_->on_alias(alias, of); }

 private:
  Capture* capture_;
};

Capture::Capture() : observer_(std::make_unique<Observer>(this)) {}
Capture::~Capture() = default;

void Capture::input(std::string name, const Tensor& t) {
  if (seen_.count(identity(t))) fail<ValueError>("capture: input '{}' is already known to the capture", name);
  const int id = graph_.add_input(std::move(name), op::meta_of(t));
  seen_[identity(t)] = {t, id};
  declared_.emplace_back(id, identity(t));
}

void Capture::record(const std::function<void()>& fn) {
  op::ObserveCalls scope(observer_.get());
  fn();
}

int Capture::value_of(const Tensor& t, const op::OpDef& reader) {
  auto it = seen_.find(identity(t));
  if (it != seen_.end()) {
    if (stale_.count(it->second.value)) {
      fail<ValueError>("capture: {} reads a {} tensor whose storage was written in place after it was made "
                       "(a view read after an in-place update cannot be captured)",
                       reader.name, meta_text(t));
    }
    return it->second.value;
  }
  if (!t.is_leaf()) {
    fail<ValueError>("capture: {} reads a {} tensor made by '{}', which is not a registry op (a custom autograd "
                     "function cannot be captured)",
                     reader.name, meta_text(t), t.grad_meta().grad_fn->name());
  }
  if (t.requires_grad()) {
    fail<ValueError>("capture: {} reads a {} tensor that requires gradients but is not a declared input "
                     "(declare every parameter with Capture::input)",
                     reader.name, meta_text(t));
  }
  const int id = graph_.add_constant(t.is_meta() ? t : t.clone());
  seen_[identity(t)] = {t, id};
  return id;
}

void Capture::on_call(const op::OpDef& op, const op::Attrs& attrs, std::span<const Tensor> inputs,
                      std::span<const Tensor> outputs) {
  std::vector<int> in;
  for (const Tensor& t : inputs) in.push_back(t.defined() ? value_of(t, op) : -1);
  const int index = graph_.add_node(op, attrs, in);
  graph_.mutable_nodes()[static_cast<size_t>(index)].rank = op::placement();
  const Node& node = graph_.nodes()[static_cast<size_t>(index)];
  for (size_t i = 0; i < outputs.size(); ++i) {
    const op::TensorMeta& inferred = graph_.value(node.outputs[i]).meta;
    if (!(inferred == op::meta_of(outputs[i]))) {
      fail<Error>("capture: {} output {} is {} but its inference rule says {} {}", op.name, i, meta_text(outputs[i]),
                  name(inferred.dtype), to_string(inferred.shape));
    }
  }
  auto root = [&](int v) {
    auto it = root_of_.find(v);
    return it == root_of_.end() ? v : it->second;
  };
  auto share = [&](int v, int r) {
    root_of_[v] = r;
    if (sharing_[r].empty()) sharing_[r].push_back(r);
    sharing_[r].push_back(v);
  };
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;  // an in-place op's omitted optional input
    const int out = node.outputs[i];
    if (op.effect == op::Effect::view && i == 0) share(out, root(in.at(0)));
    if (op.effect == op::Effect::inplace) {
      // Every other value on this storage now holds old contents.
      const int r = root(in.at(static_cast<size_t>(op.mutates[i])));
      for (int v : sharing_[r]) stale_.insert(v);
      stale_.insert(r);
      share(out, r);
    }
    seen_[identity(outputs[i])] = {outputs[i], out};
  }
}

void Capture::on_alias(const Tensor& alias, const Tensor& of) {
  auto it = seen_.find(identity(of));
  if (it != seen_.end()) seen_[identity(alias)] = {alias, it->second.value};
}

void Capture::output(std::string name, const Tensor& t) {
  auto it = seen_.find(identity(t));
  if (it == seen_.end()) fail<ValueError>("capture: output '{}' ({}) was not produced by the recorded code", name, meta_text(t));
  graph_.add_output(std::move(name), it->second.value);
}

Graph Capture::finish() {
  for (const auto& [input, id] : declared_) {
    const int now = seen_.at(id).value;
    if (now != input) graph_.add_update(input, now);
  }
  graph_.validate();
  return std::move(graph_);
}

}  // namespace braid::graph
