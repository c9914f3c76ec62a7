// braid.optim: the optimizers of braid/optim over a list of parameters
// (model.parameters()), learning-rate schedules and gradient clipping. A step
// runs with the GIL released (L-BFGS takes it back to call its closure).
#include <mutex>

#include "bindings.h"
#include "braid/optim/adagrad.h"
#include "braid/optim/adam.h"
#include "braid/optim/clip.h"
#include "braid/optim/lamb.h"
#include "braid/optim/lars.h"
#include "braid/optim/lbfgs.h"
#include "braid/optim/rmsprop.h"
#include "braid/optim/schedule.h"
#include "braid/optim/sgd.h"
#include <nanobind/stl/function.h>
#include <nanobind/stl/pair.h>

namespace braid::python {

namespace {

using optim::Optimizer;

nb::object json_to_python(const nlohmann::json& j) {
  return nb::module_::import_("json").attr("loads")(j.dump());
}

nlohmann::json python_to_json(nb::handle h) {
  return nlohmann::json::parse(nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(h)));
}

}  // namespace

void bind_optim(nb::module_& m) {
  nb::module_ o = m.def_submodule("optim", "Optimizers (braid/optim), learning-rate schedules, gradient clipping.");
  nb::class_<Optimizer>(o, "Optimizer",
                        "Updates a fixed list of parameters from their .grad; per-parameter state is f32 tensors, "
                        "scalars a dict, both in state_dict().")
      .def("step", &Optimizer::step, release_gil(), "One update from the parameters' current gradients.")
      .def("zero_grad", &Optimizer::zero_grad, "set_to_none"_a = true)
      .def_prop_rw("lr", &Optimizer::lr, &Optimizer::set_lr)
      .def_prop_ro("name", &Optimizer::name)
      .def_prop_ro("steps", &Optimizer::steps)
      .def_prop_ro("params", &Optimizer::params)
      .def_prop_rw(
          "hyper_parameters", [](const Optimizer& opt) { return json_to_python(opt.hyper_parameters()); },
          [](Optimizer& opt, nb::handle h) { opt.set_hyper_parameters(python_to_json(h)); },
          "Hyper-parameters beyond lr ({'momentum': 0.9, ...}); assigning changes those named.")
      .def("state_dict", [](const Optimizer& opt) {
        const optim::OptimizerState s = opt.state_dict();
        nb::dict tensors;
        for (const auto& [n, t] : s.tensors) tensors[n.c_str()] = t;
        nb::dict out;
        out["tensors"] = tensors;
        out["scalars"] = json_to_python(s.scalars);
        return out;
      }, "{'tensors': {'<param index>.<buffer>': Tensor}, 'scalars': {...}}")
      .def("load_state_dict", [](Optimizer& opt, nb::dict state) {
        optim::OptimizerState s;
        for (auto [k, v] : nb::cast<nb::dict>(state["tensors"]))
          s.tensors.emplace_back(nb::cast<std::string>(k), nb::cast<Tensor>(v));
        s.scalars = python_to_json(state["scalars"]);
        nb::gil_scoped_release r;
        opt.load_state_dict(s);
      }, "state"_a);

  nb::class_<optim::SGD, Optimizer>(o, "SGD", "torch.optim.SGD's update: momentum, dampening, Nesterov, L2 decay.")
      .def("__init__", [](optim::SGD* s, std::vector<Tensor> params, double lr, double momentum, double dampening,
                          double weight_decay, bool nesterov) {
        new (s) optim::SGD(std::move(params), {.lr = lr, .momentum = momentum, .dampening = dampening,
                                               .weight_decay = weight_decay, .nesterov = nesterov});
      }, "params"_a, "lr"_a = 0.01, "momentum"_a = 0.0, "dampening"_a = 0.0, "weight_decay"_a = 0.0,
           "nesterov"_a = false);
  nb::class_<optim::Adam, Optimizer>(o, "Adam")
      .def("__init__", [](optim::Adam* a, std::vector<Tensor> params, double lr, std::pair<double, double> betas,
                          double eps, double weight_decay) {
        new (a) optim::Adam(std::move(params), {.lr = lr, .beta1 = betas.first, .beta2 = betas.second, .eps = eps,
                                                .weight_decay = weight_decay});
      }, "params"_a, "lr"_a = 1e-3, "betas"_a = std::make_pair(0.9, 0.999), "eps"_a = 1e-8, "weight_decay"_a = 0.0);
  nb::class_<optim::AdamW, optim::Adam>(o, "AdamW", "Adam with decoupled weight decay (default 0.01, as torch).")
      .def("__init__", [](optim::AdamW* a, std::vector<Tensor> params, double lr, std::pair<double, double> betas,
                          double eps, double weight_decay) {
        new (a) optim::AdamW(std::move(params), {.lr = lr, .beta1 = betas.first, .beta2 = betas.second, .eps = eps,
                                                 .weight_decay = weight_decay});
      }, "params"_a, "lr"_a = 1e-3, "betas"_a = std::make_pair(0.9, 0.999), "eps"_a = 1e-8, "weight_decay"_a = 0.01);
  nb::class_<optim::AdaGrad, Optimizer>(o, "AdaGrad")
      .def("__init__", [](optim::AdaGrad* a, std::vector<Tensor> params, double lr, double lr_decay,
                          double weight_decay, double initial, double eps) {
        new (a) optim::AdaGrad(std::move(params), {.lr = lr, .lr_decay = lr_decay, .weight_decay = weight_decay,
                                                   .initial_accumulator_value = initial, .eps = eps});
      }, "params"_a, "lr"_a = 0.01, "lr_decay"_a = 0.0, "weight_decay"_a = 0.0, "initial_accumulator_value"_a = 0.0,
           "eps"_a = 1e-10);
  nb::class_<optim::RMSProp, Optimizer>(o, "RMSProp")
      .def("__init__", [](optim::RMSProp* r, std::vector<Tensor> params, double lr, double alpha, double eps,
                          double weight_decay, double momentum, bool centered) {
        new (r) optim::RMSProp(std::move(params), {.lr = lr, .alpha = alpha, .eps = eps, .weight_decay = weight_decay,
                                                   .momentum = momentum, .centered = centered});
      }, "params"_a, "lr"_a = 0.01, "alpha"_a = 0.99, "eps"_a = 1e-8, "weight_decay"_a = 0.0, "momentum"_a = 0.0,
           "centered"_a = false);
  nb::class_<optim::LARS, Optimizer>(o, "LARS")
      .def("__init__", [](optim::LARS* l, std::vector<Tensor> params, double lr, double momentum, double weight_decay,
                          double eta, double eps) {
        new (l) optim::LARS(std::move(params), {.lr = lr, .momentum = momentum, .weight_decay = weight_decay,
                                                .eta = eta, .eps = eps});
      }, "params"_a, "lr"_a = 0.1, "momentum"_a = 0.9, "weight_decay"_a = 0.0, "eta"_a = 0.001, "eps"_a = 1e-8);
  nb::class_<optim::LAMB, Optimizer>(o, "LAMB")
      .def("__init__", [](optim::LAMB* l, std::vector<Tensor> params, double lr, std::pair<double, double> betas,
                          double eps, double weight_decay) {
        new (l) optim::LAMB(std::move(params), {.lr = lr, .beta1 = betas.first, .beta2 = betas.second, .eps = eps,
                                                .weight_decay = weight_decay});
      }, "params"_a, "lr"_a = 1e-3, "betas"_a = std::make_pair(0.9, 0.999), "eps"_a = 1e-6, "weight_decay"_a = 0.0);
  // L-BFGS evaluates the whole batch through a Python closure: the closure
  // is called with the GIL taken back from the released step().
  nb::class_<optim::LBFGS, Optimizer>(o, "LBFGS",
                                      "Full-batch L-BFGS (torch.optim.LBFGS); closure() zeroes the gradients, "
                                      "computes the loss, runs backward and returns the loss as a float.")
      .def("__init__", [](optim::LBFGS* l, std::vector<Tensor> params, nb::object closure, double lr, int max_iter,
                          int history_size, bool strong_wolfe) {
        auto holder = std::make_shared<nb::object>(std::move(closure));
        std::function<double()> fn = [holder]() {
          nb::gil_scoped_acquire gil;
          return nb::cast<double>((*holder)());
        };
        new (l) optim::LBFGS(std::move(params), std::move(fn),
                             {.lr = lr, .max_iter = max_iter, .history_size = history_size,
                              .strong_wolfe = strong_wolfe});
      }, "params"_a, "closure"_a, "lr"_a = 1.0, "max_iter"_a = 20, "history_size"_a = 100, "strong_wolfe"_a = true)
      .def_prop_ro("last_loss", &optim::LBFGS::last_loss);

  nb::class_<optim::LRSchedule>(o, "LRSchedule", "A learning rate as a pure function of the step.")
      .def("__call__", &optim::LRSchedule::lr_at, "step"_a)
      .def("lr_at", &optim::LRSchedule::lr_at, "step"_a);
  o.def("make_schedule", [](const std::string& name, double base_lr, int64_t total_steps, int64_t step_size,
                            double gamma, double min_lr, int64_t warmup_steps, double warmup_start_factor) {
          return std::shared_ptr<optim::LRSchedule>(optim::make_schedule(
              {.name = name, .base_lr = base_lr, .total_steps = total_steps, .step_size = step_size, .gamma = gamma,
               .min_lr = min_lr, .warmup_steps = warmup_steps, .warmup_start_factor = warmup_start_factor}));
        }, "name"_a = "constant", "base_lr"_a = 0.01, "total_steps"_a = 0, "step_size"_a = 1000, "gamma"_a = 0.1,
        "min_lr"_a = 0.0, "warmup_steps"_a = 0, "warmup_start_factor"_a = 0.0,
        "constant | step | cosine, with optional linear warmup (the optim.schedule keys).");
  o.def("grad_norm", &optim::grad_norm, "params"_a, release_gil(), "Global L2 norm of the parameters' gradients.");
  o.def("clip_grad_norm", &optim::clip_grad_norm, "params"_a, "max_norm"_a, release_gil(),
        "Scales the gradients so their global norm is at most max_norm; returns the norm before.");
}

}  // namespace braid::python
