// braid.nn: the modules of braid/nn composable from Python, Python
// subclasses of braid.nn.Module (a trampoline calls their forward from C++,
// so a model written in Python runs under the trainer and its plans), and
// the model families by name (train/models.h).
#include "bindings.h"
#include "braid/nn/activation.h"
#include "braid/nn/attention.h"
#include "braid/nn/conv.h"
#include "braid/nn/dropout.h"
#include "braid/nn/linear.h"
#include "braid/nn/loss.h"
#include "braid/nn/norm.h"
#include "braid/nn/sequential.h"
#include "braid/nn/weight_norm.h"
#include "braid/train/models.h"
#include <nanobind/trampoline.h>

namespace braid::python {

namespace {

// What modules are initialised from when no generator is given
// (braid.manual_seed reseeds it). Modules are built with the GIL held.
Generator& default_generator() {
  static Generator g(0, 0);
  return g;
}
Generator& gen_or_default(Generator* g) { return g ? *g : default_generator(); }

// A module written in Python: forward is the Python method; parameters,
// buffers and children are registered by attribute assignment
// (braid/nn.py) or the register_* methods.
class PyModule : public nn::Module {
 public:
  NB_TRAMPOLINE(nn::Module, 1);
  Tensor forward(const Tensor& x) override { NB_OVERRIDE_PURE(forward, x); }

  void add_parameter(const std::string& name, const Tensor& t) {
    check_new(name);
    register_parameter(name, t);
  }
  void add_buffer(const std::string& name, const Tensor& t) {
    check_new(name);
    register_buffer(name, t);
  }
  // A child under `name`, in place of the one there (keeping its position).
  void add_module(const std::string& name, std::shared_ptr<nn::Module> m) {
    const auto& kids = children();
    for (size_t i = 0; i < kids.size(); ++i) {
      if (kids[i].first == name) {
        replace_child(i, std::move(m));
        return;
      }
    }
    register_module(name, std::move(m));
  }
  bool has_tensor(const std::string& name) const { return own_tensor(name).defined(); }
  // This module's own parameter or buffer `name` (not a child's); undefined if none.
  Tensor own_tensor(const std::string& name) const {
    for (const auto& [n, t] : named_parameters())
      if (n == name) return t;
    for (const auto& [n, t] : named_buffers())
      if (n == name) return t;
    return Tensor();
  }

 private:
  void check_new(const std::string& name) const {
    if (name.empty() || name.find('.') != std::string::npos)
      fail<ValueError>("a parameter or buffer name is non-empty and has no '.': '{}'", name);
    if (has_tensor(name))
      fail<ValueError>("'{}' is already registered; copy new values into it with .copy_() instead", name);
  }
};

PyModule& python_module(nb::handle self, const char* what) {
  if (!nb::inst_ready(self)) fail<ValueError>("{}: call super().__init__() first", what);
  auto* py = dynamic_cast<PyModule*>(&nb::cast<nn::Module&>(self));
  if (!py) fail<ValueError>("{}: only modules written in Python take new parameters, buffers or children", what);
  return *py;
}

void set_plain_attr(nb::handle self, const std::string& name, nb::handle value) {
  if (PyObject_GenericSetAttr(self.ptr(), nb::str(name.c_str()).ptr(), value.ptr()) != 0) throw nb::python_error();
}

nb::list named(const nn::NamedTensors& ts) {
  nb::list out;
  for (const auto& [n, t] : ts) out.append(nb::make_tuple(n, t));
  return out;
}

nb::dict as_dict(const nn::NamedTensors& ts) {
  nb::dict out;
  for (const auto& [n, t] : ts) out[n.c_str()] = t;
  return out;
}

// A model by family name and model.* settings, as `braid train` builds it.
std::shared_ptr<nn::Module> build_model(const std::string& name, nb::dict settings, nb::handle input_shape,
                                        int64_t classes, uint64_t seed) {
  train::Config config(train::braid_schema());
  config.set_text("model.name", name, "braid.nn.build_model");
  for (auto [k, v] : settings) {
    std::string key = nb::cast<std::string>(nb::str(k));
    if (key.find('.') == std::string::npos) key = "model." + key;
    std::string text;
    if (PyBool_Check(v.ptr())) {
      text = v.ptr() == Py_True ? "true" : "false";
    } else {
      text = nb::cast<std::string>(nb::str(v));
    }
    config.set_text(key, text, "braid.nn.build_model");
  }
  Generator gen(seed, /*stream=*/0);
  const train::ModelInfo info{.input_shape = to_shape(input_shape), .classes = classes};
  nb::gil_scoped_release release;
  return train::build_model(config, info, gen);
}

}  // namespace

Generator& python_default_generator() { return default_generator(); }

void bind_nn(nb::module_& m) {
  nb::module_ nn_mod = m.def_submodule("nn", "Modules (braid/nn) and model families.");
  using nn::Module;
  nb::class_<Module, PyModule>(
      nn_mod, "Module",
      "A piece of a model with named parameters, buffers and children (names as torch's state_dict). Subclass it "
      "in Python and define forward(x); tensors that require grad and modules assigned as attributes are "
      "registered.")
      .def(nb::init<>())
      .def("forward", &Module::forward, "x"_a, release_gil())
      .def("__call__", [](Module& mod, const Tensor& x) { return mod.forward(x); }, "x"_a, release_gil())
      .def("__call__", [](nb::handle self, nb::args args, nb::kwargs kwargs) {
        return self.attr("forward")(*args, **kwargs);
      }, "args"_a, "kwargs"_a)
      .def("named_parameters", [](const Module& mod) { return named(mod.named_parameters()); })
      .def("parameters", &Module::parameters)
      .def("named_buffers", [](const Module& mod) { return named(mod.named_buffers()); })
      .def("state_dict", [](const Module& mod) { return as_dict(mod.state_dict()); },
           "Parameters then buffers by dotted name; the tensors are the module's own (not copies).")
      .def("load_state_dict", [](Module& mod, nb::dict state, bool strict) {
        nn::NamedTensors ts;
        for (auto [k, v] : state) ts.emplace_back(nb::cast<std::string>(k), nb::cast<Tensor>(v));
        nb::gil_scoped_release r;
        mod.load_state_dict(ts, strict);
      }, "state_dict"_a, "strict"_a = true,
           "Copies values into the module's tensors in place; ValueError naming the key when a shape differs, a "
           "key is unknown or (strict) missing, and then nothing is changed.")
      .def("train", [](nb::handle self, bool on) {
        nb::cast<Module&>(self).train(on);
        return self;
      }, "mode"_a = true)
      .def("eval", [](nb::handle self) {
        nb::cast<Module&>(self).eval();
        return self;
      })
      .def_prop_ro("training", &Module::is_training)
      .def("to", [](nb::handle self, nb::handle device) {
        const Device d = to_device(device);
        {
          nb::gil_scoped_release r;
          nb::cast<Module&>(self).to(d);
        }
        return self;
      }, "device"_a, "Moves every parameter and buffer in place (each handle keeps its identity).")
      .def_prop_ro("device", &Module::device)
      .def("num_parameters", &Module::num_parameters)
      .def("children", [](const Module& mod) {
        nb::list out;
        for (const auto& [n, c] : mod.children()) out.append(nb::make_tuple(n, c));
        return out;
      }, "(name, module) of the direct children, in registration order.")
      .def("zero_grad", [](const Module& mod) {
        for (const Tensor& p : mod.parameters()) p.grad_meta().grad.reset();
      }, "Drops every parameter's gradient.")
      .def("register_parameter", [](nb::handle self, const std::string& name, const Tensor& t) {
        python_module(self, "register_parameter").add_parameter(name, t);
        set_plain_attr(self, name, nb::cast(t));
        return t;
      }, "name"_a, "tensor"_a, "Registers a parameter (marks it requires_grad), sets it as an attribute, returns it.")
      .def("register_buffer", [](nb::handle self, const std::string& name, const Tensor& t) {
        python_module(self, "register_buffer").add_buffer(name, t);
        set_plain_attr(self, name, nb::cast(t));
        return t;
      }, "name"_a, "tensor"_a, "Registers non-trainable state (saved in state_dict, moved by to()) as an attribute.")
      .def("register_module", [](nb::handle self, const std::string& name, nb::handle child) {
        PyModule& py = python_module(self, "register_module");
        if (child.ptr() == self.ptr()) fail<ValueError>("register_module: a module cannot be its own child");
        py.add_module(name, nb::cast<std::shared_ptr<Module>>(child));
        set_plain_attr(self, name, child);
      }, "name"_a, "module"_a)
      .def("__setattr__", [](nb::handle self, const std::string& name, nb::handle value) {
        const bool model_part = nb::isinstance<Module>(value) || nb::isinstance<Tensor>(value);
        if (model_part && !name.starts_with("_")) {
          if (!nb::inst_ready(self))
            fail<ValueError>("assigning '{}' before the module exists: call super().__init__() first", name);
          if (auto* py = dynamic_cast<PyModule*>(&nb::cast<Module&>(self))) {
            if (nb::isinstance<Module>(value)) {
              py->add_module(name, nb::cast<std::shared_ptr<Module>>(value));
            } else {
              const Tensor t = nb::cast<Tensor>(value);
              const Tensor old = py->own_tensor(name);
              if (old.defined() && !old.same(t))
                fail<ValueError>("'{}' is a registered tensor of the module; copy new values into it with "
                                 ".copy_() (a new tensor would not be the one optimizers and plans hold)", name);
              // Leaves that require grad are parameters (as torch's nn.Parameter);
              // other tensors are plain attributes (register_buffer for state).
              if (!old.defined() && t.is_leaf() && t.requires_grad()) py->add_parameter(name, t);
            }
          }
        }
        set_plain_attr(self, name, value);
      }, "name"_a, "value"_a)
      .def("_is_python_module", [](const Module& mod) { return dynamic_cast<const PyModule*>(&mod) != nullptr; })
      .def("_has_tensor", [](const Module& mod, const std::string& name) {
        auto* py = dynamic_cast<const PyModule*>(&mod);
        return py && py->has_tensor(name);
      });

  nb::class_<nn::Sequential, Module>(nn_mod, "Sequential",
                                     "Children applied in order, named '0', '1', ... as torch.nn.Sequential.")
      .def("__init__", [](nn::Sequential* s, nb::args layers) {
        new (s) nn::Sequential();
        for (nb::handle h : layers) s->push_back(nb::cast<std::shared_ptr<Module>>(h));
      }, "layers"_a)
      .def("append", [](nn::Sequential& s, std::shared_ptr<Module> layer) { s.push_back(std::move(layer)); },
           "layer"_a)
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](const nn::Sequential& s, int64_t i) {
        const int64_t n = static_cast<int64_t>(s.size());
        if (i < -n || i >= n) fail<IndexError>("Sequential of {} layers has no layer {}", n, i);
        return s.layer(static_cast<size_t>(i < 0 ? i + n : i));
      }, "index"_a);

  nb::class_<nn::Linear, Module>(nn_mod, "Linear", "y = x W^T + b; W [out, in] and b ~ U(-1/sqrt(in), 1/sqrt(in)).")
      .def("__init__", [](nn::Linear* l, int64_t in, int64_t out, bool bias, Generator* g) {
        new (l) nn::Linear(in, out, gen_or_default(g), {.bias = bias});
      }, "in_features"_a, "out_features"_a, "bias"_a = true, "generator"_a = nb::none())
      .def_prop_ro("weight", &nn::Linear::weight)
      .def_prop_ro("bias", [](const nn::Linear& l) -> std::optional<Tensor> {
        if (!l.bias().defined()) return std::nullopt;
        return l.bias();
      });

  nb::class_<nn::Conv2d, Module>(nn_mod, "Conv2d", "2-d convolution over [N, C, H, W].")
      .def("__init__", [](nn::Conv2d* c, int64_t in, int64_t out, nb::handle kernel, nb::handle stride,
                          nb::handle padding, nb::handle dilation, int64_t groups, bool bias, Generator* g) {
        auto pair = [](nb::handle h) {
          if (PyLong_Check(h.ptr())) {
            const int64_t v = nb::cast<int64_t>(h);
            return std::array<int64_t, 2>{v, v};
          }
          const Shape s = to_shape(h);
          if (s.size() != 2) fail<ValueError>("Conv2d: expected an int or a pair of ints");
          return std::array<int64_t, 2>{s[0], s[1]};
        };
        new (c) nn::Conv2d(in, out, pair(kernel), gen_or_default(g),
                           {.stride = pair(stride), .padding = pair(padding), .dilation = pair(dilation),
                            .groups = groups, .bias = bias});
      }, "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a = 1, "padding"_a = 0, "dilation"_a = 1,
           "groups"_a = 1, "bias"_a = true, "generator"_a = nb::none())
      .def_prop_ro("weight", &nn::Conv2d::weight)
      .def_prop_ro("bias", [](const nn::Conv2d& c) -> std::optional<Tensor> {
        if (!c.bias().defined()) return std::nullopt;
        return c.bias();
      });

  auto pool_options = [](nb::handle kernel, nb::handle stride, nb::handle padding, bool count_include_pad) {
    auto pair = [](nb::handle h) {
      if (PyLong_Check(h.ptr())) {
        const int64_t v = nb::cast<int64_t>(h);
        return std::array<int64_t, 2>{v, v};
      }
      const Shape s = to_shape(h);
      if (s.size() != 2) fail<ValueError>("pooling: expected an int or a pair of ints");
      return std::array<int64_t, 2>{s[0], s[1]};
    };
    return Pool2dOptions{.kernel = pair(kernel),
                         .stride = stride.is_none() ? std::array<int64_t, 2>{0, 0} : pair(stride),
                         .padding = pair(padding), .count_include_pad = count_include_pad};
  };
  nb::class_<nn::MaxPool2d, Module>(nn_mod, "MaxPool2d")
      .def("__init__", [pool_options](nn::MaxPool2d* p, nb::handle k, nb::handle s, nb::handle pad) {
        new (p) nn::MaxPool2d(pool_options(k, s, pad, true));
      }, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0);
  nb::class_<nn::AvgPool2d, Module>(nn_mod, "AvgPool2d")
      .def("__init__", [pool_options](nn::AvgPool2d* p, nb::handle k, nb::handle s, nb::handle pad, bool cip) {
        new (p) nn::AvgPool2d(pool_options(k, s, pad, cip));
      }, "kernel_size"_a, "stride"_a = nb::none(), "padding"_a = 0, "count_include_pad"_a = true);
  nb::class_<nn::GlobalAvgPool2d, Module>(nn_mod, "GlobalAvgPool2d", "[N, C, H, W] -> [N, C]: each plane's mean.")
      .def(nb::init<>());

  nb::class_<nn::BatchNorm2d, Module>(nn_mod, "BatchNorm2d")
      .def("__init__", [](nn::BatchNorm2d* b, int64_t channels, double eps, double momentum, bool affine,
                          int64_t ghost) {
        new (b) nn::BatchNorm2d(channels, {.eps = eps, .momentum = momentum, .affine = affine, .ghost_batch = ghost});
      }, "num_features"_a, "eps"_a = 1e-5, "momentum"_a = 0.1, "affine"_a = true, "ghost_batch"_a = 0);
  nb::class_<nn::LayerNorm, Module>(nn_mod, "LayerNorm")
      .def("__init__", [](nn::LayerNorm* l, nb::handle shape, double eps, bool affine) {
        new (l) nn::LayerNorm(to_shape(shape), eps, affine);
      }, "normalized_shape"_a, "eps"_a = 1e-5, "elementwise_affine"_a = true);

  // Dropout layers keep a pointer to their generator: the module keeps the
  // Python object alive (nb::keep_alive) so the pointer stays valid.
  nb::class_<nn::Dropout, Module>(nn_mod, "Dropout")
      .def(nb::init<double, Generator*>(), "p"_a = 0.5, "generator"_a = nb::none(), nb::keep_alive<1, 3>())
      .def_prop_ro("p", &nn::Dropout::p);
  nb::class_<nn::Embedding, Module>(nn_mod, "Embedding", "Rows of weight [num, dim] (~ N(0, 1)) by int64 index.")
      .def("__init__", [](nn::Embedding* e, int64_t num, int64_t dim, Generator* g) {
        new (e) nn::Embedding(num, dim, gen_or_default(g));
      }, "num_embeddings"_a, "embedding_dim"_a, "generator"_a = nb::none())
      .def_prop_ro("weight", &nn::Embedding::weight);
  nb::class_<nn::MultiHeadAttention, Module>(nn_mod, "MultiHeadAttention",
                                             "Self-attention [B, T, D] -> [B, T, D] with packed q, k, v projections.")
      .def("__init__", [](nn::MultiHeadAttention* a, int64_t dim, int64_t heads, bool causal, double dropout,
                          Generator* g, Generator* dropout_generator) {
        new (a) nn::MultiHeadAttention(dim, heads, gen_or_default(g),
                                       {.causal = causal, .dropout = dropout, .generator = dropout_generator});
      }, "dim"_a, "heads"_a, "causal"_a = true, "dropout"_a = 0.0, "generator"_a = nb::none(),
           "dropout_generator"_a = nb::none(), nb::keep_alive<1, 7>());
  nb::class_<nn::TransformerBlock, Module>(nn_mod, "TransformerBlock",
                                           "Pre-norm causal block (GPT-2 layout): x + attn(ln1(x)), then + mlp(ln2(x)).")
      .def("__init__", [](nn::TransformerBlock* b, int64_t dim, int64_t heads, bool causal, double dropout,
                          Generator* g, Generator* dropout_generator) {
        new (b) nn::TransformerBlock(dim, heads, gen_or_default(g),
                                     {.causal = causal, .dropout = dropout, .generator = dropout_generator});
      }, "dim"_a, "heads"_a, "causal"_a = true, "dropout"_a = 0.0, "generator"_a = nb::none(),
           "dropout_generator"_a = nb::none(), nb::keep_alive<1, 7>());
  nb::class_<nn::TokenPositionEmbedding, Module>(nn_mod, "TokenPositionEmbedding",
                                                 "tokens [B, T] -> token + position embeddings [B, T, D].")
      .def("__init__", [](nn::TokenPositionEmbedding* e, int64_t vocab, int64_t context, int64_t dim, double dropout,
                          Generator* g, Generator* dropout_generator) {
        new (e) nn::TokenPositionEmbedding(vocab, context, dim, gen_or_default(g), dropout, dropout_generator);
      }, "vocab"_a, "context"_a, "dim"_a, "dropout"_a = 0.0, "generator"_a = nb::none(),
           "dropout_generator"_a = nb::none(), nb::keep_alive<1, 7>());
  nb::class_<nn::ReLU, Module>(nn_mod, "ReLU").def(nb::init<>());
  nb::class_<nn::Tanh, Module>(nn_mod, "Tanh").def(nb::init<>());
  nb::class_<nn::GELU, Module>(nn_mod, "GELU")
      .def("__init__", [](nn::GELU* g, const std::string& a) {
        if (a != "none" && a != "tanh") fail<ValueError>("GELU: approximate is 'none' or 'tanh', not '{}'", a);
        new (g) nn::GELU(a == "tanh" ? GeluApproximation::tanh : GeluApproximation::none);
      }, "approximate"_a = "none");
  nb::class_<nn::Flatten, Module>(nn_mod, "Flatten").def(nb::init<int64_t, int64_t>(), "start_dim"_a = 1,
                                                         "end_dim"_a = -1);
  nb::class_<nn::WeightNorm, Module>(nn_mod, "WeightNorm",
                                     "Weight normalisation of a Linear or Conv2d: weight = g * v / ||v||.")
      .def(nb::init<std::shared_ptr<nn::Linear>>(), "layer"_a)
      .def(nb::init<std::shared_ptr<nn::Conv2d>>(), "layer"_a)
      .def_prop_ro("weight", &nn::WeightNorm::weight);

  nn_mod.def("build_model", &build_model, "name"_a, "settings"_a = nb::dict(), "input_shape"_a, "classes"_a,
             "seed"_a = 0,
             "The model family `name` (mlp, cnn, char_transformer, and the families of the trainer: gpt, resnet) "
             "as `braid train` builds it from model.* settings ({'d_model': 64} or {'model.d_model': 64}), for "
             "examples of input_shape and `classes` outputs, its weights drawn from `seed`.");
  nn_mod.def("loss_names", [] { return std::vector<std::string>{"cross_entropy", "nll", "mse", "bce_with_logits"}; });

  m.def("manual_seed", [](uint64_t seed) { default_generator().set_state({seed, 0, 0}); }, "seed"_a,
        "Reseeds the generator modules draw their initial weights from when given none.");
  m.def("default_generator", &default_generator, nb::rv_policy::reference,
        "The generator modules draw their initial weights from when given none.");
}

}  // namespace braid::python
