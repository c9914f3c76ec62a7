// The op registry: every op braid offers is described here once — its name,
// attributes, shape and dtype inference, kernels by device and dtype, its
// backward written in ops, and its cost. The eager functions (add, matmul,
// conv2d, ...) are thin callers of call(); autograd, the meta device, graph
// capture and the Work-Depth analysis all read the same description.
//
//   const OpDef& op = op::find("add");
//   Tensor y = op::call1(op, {a, b});
//
// call() runs the kernel for the inputs' device and dtype (a meta input runs
// inference only; inputs on two devices are an error), records an autograd node when an input needs gradients,
// and tells the thread's CallObserver, if any (graph capture).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "braid/tensor/tensor.h"

namespace braid::op {

// What an op takes besides tensors. Booleans and enums are ints.
using AttrValue = std::variant<int64_t, double, std::vector<int64_t>, std::string>;

// Named attribute values, in the order the op sets them.
class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string_view, AttrValue>> items);

  Attrs& set(std::string_view key, AttrValue value);
  bool has(std::string_view key) const;
  // Typed reads; a missing key or another type is a ValueError naming both.
  int64_t i(std::string_view key) const;
  bool b(std::string_view key) const { return i(key) != 0; }
  double f(std::string_view key) const;
  const std::vector<int64_t>& ints(std::string_view key) const;
  const std::string& s(std::string_view key) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& other) const { return items_ == other.items_; }
  // "dim=1, keepdim=1"; doubles print with enough digits to read back.
  std::string to_string() const;
  size_t hash() const;

 private:
  const AttrValue& get(std::string_view key) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

// Shape and dtype: what inference needs and produces. `absent` marks an
// optional input the caller left out, or an optional output the op does not
// compute for these attributes (an undefined tensor either way).
struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  bool absent = false;
  bool operator==(const TensorMeta&) const = default;
};

// One call's work, from its operands' shapes (Work-Depth: work is the sum of
// flops over a graph, depth the longest chain of `depth`).
struct Cost {
  double flops = 0;  // arithmetic operations
  double bytes = 0;  // bytes read and written
  double depth = 1;  // dependent steps: 1 for a map, ceil(log2 n) for a sum of n
};

// What a kernel sees. Optional tensor inputs may be undefined.
struct Args {
  std::span<const Tensor> inputs;
  const Attrs& attrs;
};

// What a backward rule sees. Inputs and outputs the op does not save are
// undefined; every input's shape and dtype are in input_meta.
struct GradArgs {
  std::span<const Tensor> inputs;
  std::span<const TensorMeta> input_meta;
  std::span<const Tensor> outputs;
  const Attrs& attrs;
  const Tensor& grad;              // of output 0
  std::span<const uint8_t> wants;  // which inputs want a gradient
  bool needs(size_t i) const { return i < wants.size() && wants[i] != 0; }
};

using Kernel = std::function<std::vector<Tensor>(const Args&)>;
using InferFn = std::function<std::vector<TensorMeta>(std::span<const TensorMeta>, const Attrs&)>;
using BackwardFn = std::function<std::vector<Tensor>(const GradArgs&)>;
using CostFn = std::function<Cost(std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs&)>;

struct KernelEntry {
  Device device = Device::cpu;  // its type picks the kernel; the index is ignored
  std::vector<DType> dtypes;  // of the op's dtype input; empty = every dtype
  Kernel fn;
};

// How an op's outputs relate to its inputs' memory.
enum class Effect : uint8_t {
  pure,     // fresh outputs, no side effects
  view,     // output 0 shares input 0's storage
  inplace,  // writes the inputs listed in `mutates`; output i is input mutates[i]
  random,   // draws from a generator: never merged or folded
  io,       // talks to another rank (send, recv): never removed, merged or folded
};

struct OpDef {
  std::string name{};
  std::string family{};       // groups ops in reports: "elementwise", "matmul", ...
  int inputs = 1;            // -1: any number
  int outputs = 1;
  int dtype_input = 0;       // whose dtype picks the kernel
  Effect effect = Effect::pure;
  std::vector<int> mutates{};  // for Effect::inplace
  InferFn infer{};
  std::vector<KernelEntry> kernels{};
  BackwardFn backward{};      // empty: not differentiable
  uint32_t save_inputs = 0;  // bit i: backward reads input i's values
  uint32_t save_outputs = 0; // bit i: backward reads output i's values
  CostFn cost{};              // empty: a map over output 0 (one flop per element)
};

// Registers an op from a layer above this one (the graph layer's send and
// recv); throws if the name is taken. Returns the registered op.
const OpDef& define(OpDef def);

// Kernels for another device, added to ops already defined: `add` appends one
// entry to the named op. A backend built as its own library (braid/cuda)
// installs its kernels this way; they run once, when the registry is built,
// or at once if it already is.
using KernelAdder = std::function<void(std::string_view op, KernelEntry entry)>;
void on_registry_ready(std::function<void(const KernelAdder& add)> install);

// Every registered op, in registration order (stable for the program's life).
const std::vector<const OpDef*>& all();
// The op of that name; ValueError listing near names when there is none.
const OpDef& find(std::string_view name);
const OpDef* find_or_null(std::string_view name);

// Runs `op` on `inputs` (see the header comment). Checks the input count.
std::vector<Tensor> call(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {});
std::vector<Tensor> call(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});
// Output 0 of call().
Tensor call1(const OpDef& op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {});
Tensor call1(const OpDef& op, std::span<const Tensor> inputs, const Attrs& attrs = {});

// The cost of one call with these operand shapes (the default rule when the
// op has none).
Cost cost_of(const OpDef& op, std::span<const TensorMeta> in, std::span<const TensorMeta> out, const Attrs& attrs);
// The shape and dtype of t; absent when t is undefined.
TensorMeta meta_of(const Tensor& t);

// A placement hint for the ops this thread runs (a pipeline stage, a rank):
// graph capture reads it into each node. An op's backward runs under the
// hint its forward had, so a captured backward pass is placed with its
// forward. 0 unless a Placement scope is open.
int placement();
class Placement {
 public:
  explicit Placement(int hint);
  ~Placement();
  Placement(const Placement&) = delete;
  Placement& operator=(const Placement&) = delete;

 private:
  int previous_;
};

// Sees every call() on this thread while installed (graph capture). Calls an
// observer makes itself are not reported to it.
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  virtual void on_call(const OpDef& op, const Attrs& attrs, std::span<const Tensor> inputs,
                       std::span<const Tensor> outputs) = 0;
  // `alias` is a new handle on `of`'s memory holding the same values (the
  // detached copy an autograd node saves for its backward rule).
  virtual void on_alias(const Tensor& /*alias*/, const Tensor& /*of*/) {}
};

// Installs `observer` for this thread until destroyed; nests.
class ObserveCalls {
 public:
  explicit ObserveCalls(CallObserver* observer);
  ~ObserveCalls();
  ObserveCalls(const ObserveCalls&) = delete;
  ObserveCalls& operator=(const ObserveCalls&) = delete;

 private:
  CallObserver* previous_;
};

}  // namespace braid::op
