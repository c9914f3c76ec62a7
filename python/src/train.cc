// The trainer from Python (docs/python.md, "Training"): a Config from a TOML
// file or a dict plus overrides, braid.Trainer over train::make_training_run
// (so a run is exactly what `braid train` runs, on whichever plan the config
// names), a model written in Python in place of model.*, callbacks that get
// metrics as dicts, and Ctrl-C honoured at the next step boundary. fit() and
// every step run with the GIL released.
#include <cstdio>
#include <fstream>

#include "bindings.h"
#include "braid/train/callbacks_console.h"
#include "braid/train/config.h"
#include "braid/train/ensemble.h"
#include "braid/train/metrics.h"
#include "braid/train/sparse_training.h"
#include "braid/train/trainer_setup.h"

namespace braid::python {

namespace {

nb::object to_python(const nlohmann::json& j) { return nb::module_::import_("json").attr("loads")(j.dump()); }

nb::dict step_dict(const train::StepMetrics& m) {
  nb::dict d;
  d["step"] = m.step;
  d["epoch"] = m.epoch;
  d["batch"] = m.batch;
  d["batches_per_epoch"] = m.batches_per_epoch;
  d["total_steps"] = m.total_steps;
  d["loss"] = m.loss;
  d["lr"] = m.lr;
  d["samples_per_s"] = m.samples_per_s;
  d["step_ms"] = m.step_ms;
  d["examples"] = m.examples;
  if (!m.codec.empty()) d["codec"] = to_python(m.codec);
  return d;
}

nb::dict eval_dict(const train::EvalMetrics& e) {
  nb::dict d;
  d["step"] = e.step;
  d["epoch"] = e.epoch;
  d["within_epoch"] = e.within_epoch;
  d["loss"] = e.loss;
  d["top1"] = e.top1;
  d["top5"] = e.top5;
  d["examples"] = e.examples;
  d["seconds"] = e.seconds;
  return d;
}

// "a.b" -> value entries of a dict that is flat ({"train.epochs": 2}) or
// nested by section ({"train": {"epochs": 2}}).
void flatten(nb::handle h, const std::string& prefix, std::vector<std::pair<std::string, nb::handle>>& out) {
  for (auto [k, v] : nb::borrow<nb::dict>(h)) {
    const std::string key = prefix + nb::cast<std::string>(nb::str(k));
    if (nb::isinstance<nb::dict>(v)) {
      flatten(v, key + ".", out);
    } else {
      out.emplace_back(key, v);
    }
  }
}

std::string value_text(nb::handle v) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True ? "true" : "false";
  return nb::cast<std::string>(nb::str(v));
}

// The run's configuration: defaults < file or dict < environment < overrides
// ("key=value" strings, or dicts like the config), as `braid train`.
train::Config make_config(nb::handle config, nb::handle overrides) {
  std::vector<std::string> sets;
  std::vector<std::pair<std::string, nb::handle>> override_items;
  for (nb::handle o : overrides) {
    if (nb::isinstance<nb::str>(o)) {
      sets.push_back(nb::cast<std::string>(o));
    } else if (nb::isinstance<nb::dict>(o)) {
      flatten(o, "", override_items);
    } else {
      fail<ConfigError>("an override is 'key=value' or a dict, not {}",
                        nb::cast<std::string>(nb::str(o.type().attr("__name__"))));
    }
  }
  train::Config c(train::braid_schema());
  if (config.is_none()) {
    c.apply_env();
  } else if (nb::isinstance<nb::str>(config) || nb::hasattr(config, "__fspath__")) {
    c = train::load_config(nb::cast<std::string>(nb::str(config)), {});
  } else if (nb::isinstance<nb::dict>(config)) {
    std::vector<std::pair<std::string, nb::handle>> items;
    flatten(config, "", items);
    for (const auto& [k, v] : items) c.set_text(k, value_text(v), "config dict");
    c.apply_env();
  } else {
    fail<ConfigError>("a config is a TOML file's path or a dict, not {}",
                      nb::cast<std::string>(nb::str(config.type().attr("__name__"))));
  }
  for (const auto& [k, v] : override_items) c.set_text(k, value_text(v), "override");
  for (const std::string& s : sets) c.set(s);
  return c;
}

// Forwards the trainer's reports to a Python object's on_* methods (any it
// lacks are skipped; a plain callable is on_step), with the GIL taken for
// the call. The one fit() adds last runs Python's signal handlers in on_step,
// so Ctrl-C raises KeyboardInterrupt there: after a step's update and its
// reports, before the next step.
class PyCallback final : public train::Callback {
 public:
  explicit PyCallback(nb::object target, bool check_signals = false)
      : target_(std::move(target)), check_signals_(check_signals) {}
  ~PyCallback() override {
    nb::gil_scoped_acquire gil;
    target_.reset();
  }
  void on_train_begin(int64_t start, int64_t total) override { call("on_train_begin", start, total); }
  void on_step(const train::StepMetrics& m) override {
    nb::gil_scoped_acquire gil;
    if (check_signals_ && PyErr_CheckSignals() != 0) throw nb::python_error();
    if (target_.is_none()) return;
    if (nb::hasattr(target_, "on_step")) {
      target_.attr("on_step")(step_dict(m));
    } else if (PyCallable_Check(target_.ptr())) {
      target_(step_dict(m));
    }
  }
  void on_log(const train::StepMetrics& m) override { call_with("on_log", [&] { return step_dict(m); }); }
  void on_eval(const train::EvalMetrics& e) override { call_with("on_eval", [&] { return eval_dict(e); }); }
  void on_checkpoint(const std::string& stem, int64_t step) override { call("on_checkpoint", stem, step); }
  void on_message(const std::string& text) override { call("on_message", text); }
  void on_train_end(const train::TrainSummary& s) override {
    nb::gil_scoped_acquire gil;
    if (!target_.is_none() && nb::hasattr(target_, "on_train_end")) target_.attr("on_train_end")(s.steps);
  }

 private:
  template <class... A>
  void call(const char* name, A&&... args) {
    nb::gil_scoped_acquire gil;
    if (!target_.is_none() && nb::hasattr(target_, name)) target_.attr(name)(std::forward<A>(args)...);
  }
  template <class F>
  void call_with(const char* name, F make) {
    nb::gil_scoped_acquire gil;
    if (!target_.is_none() && nb::hasattr(target_, name)) target_.attr(name)(make());
  }
  nb::object target_;
  bool check_signals_;
};

// braid.Trainer: a whole run as `braid train` builds it.
class PyTrainer {
 public:
  PyTrainer(nb::handle config, nb::handle overrides, nb::object model)
      : config_(make_config(config, overrides)) {
    if (config_.get_string("model.name") == "sparse_linear" && model.is_none())
      fail<ConfigError>("model.name = sparse_linear trains through its parameter servers alone: use braid.train(), "
                        "which runs it as braid train does");
    if (config_.get_int("distill.epochs") > 0)
      fail<ConfigError>("distill.epochs = {}: distilling an ensemble's members runs from the CLI (braid train); "
                        "from Python, train the members with parallel.strategy = ensemble and score them with "
                        "Trainer.evaluate_ensemble()", config_.get_int("distill.epochs"));
    train::RunOptions options;
    if (!model.is_none()) {
      // A module, or a function (input_shape, classes) -> module; called once
      // on every rank, with the GIL.
      auto holder = std::make_shared<nb::object>(std::move(model));
      options.build_model = [holder](const train::ModelInfo& info, Generator& init) {
        nb::gil_scoped_acquire gil;
        nb::object m = *holder;
        // A function builds with braid's default generator at train.seed's
        // state (an ensemble member's own seed): braid.nn layers it makes
        // draw what build_model would, and members differ.
        if (!nb::isinstance<nn::Module>(m)) {
          python_default_generator().set_state(init.state());
          m = m(to_tuple(info.input_shape), info.classes);
        }
        if (!nb::isinstance<nn::Module>(m))
          fail<ValueError>("the model function returned {}, not a braid.nn.Module",
                           nb::cast<std::string>(nb::str(m.type().attr("__name__"))));
        std::shared_ptr<nn::Module> out = nb::cast<std::shared_ptr<nn::Module>>(m);
        holder->reset();  // the run holds the module from here
        return out;
      };
      python_model_ = true;
    }
    nb::gil_scoped_release release;
    run_ = train::make_training_run(config_, std::move(options));
    config_.refuse_unread(python_model_ ? "braid.Trainer (with a Python model)" : "braid.Trainer");
  }

  // The leader's console and metrics files, as `braid train` writes them.
  void report(const std::string& mode) {
    if (!run_.leader) return;
    run_.trainer->add_callback(std::make_shared<train::MetricsLogger>(train::MetricsOptions{.out_dir = run_.out_dir}));
    run_.trainer->add_callback(
        std::make_shared<train::ConsoleReporter>(train::console_mode(mode.empty() ? run_.progress : mode, stdout)));
  }
  void add_callback(nb::object cb) { run_.trainer->add_callback(std::make_shared<PyCallback>(std::move(cb))); }

  nb::dict fit() {
    // Python's signal handlers run after the callbacks added so far have
    // seen the step (a KeyboardInterrupt from Ctrl-C leaves the run there).
    if (!interrupt_check_) {
      run_.trainer->add_callback(std::make_shared<PyCallback>(nb::none(), /*check_signals=*/true));
      interrupt_check_ = true;
    }
    train::TrainSummary s;
    {
      nb::gil_scoped_release release;
      // Ranks other than the leader evaluate only where its evaluation needs them.
      if (!run_.leader && !run_.trainer->plan().evaluation_is_collective()) run_.trainer->skip_evaluations();
      s = run_.trainer->fit();
    }
    const int servers = run_.group ? run_.group->env().ps_servers : 0;
    const int world = run_.group ? run_.group->comm().size() - servers : 1;
    const int replicas = run_.trainer->plan().data_world();
    nb::dict d;
    d["steps"] = s.steps;
    d["epochs"] = s.epochs;
    d["train_seconds"] = s.train_seconds;
    d["samples_per_s"] = s.samples_per_s;
    d["final_loss"] = s.final_loss;
    d["last_checkpoint"] = s.last_checkpoint;
    d["world"] = world;
    d["replicas"] = replicas;
    d["global_samples_per_s"] = s.samples_per_s * replicas;
    d["leader"] = run_.leader;
    if (s.has_eval) d["eval"] = eval_dict(s.last_eval);
    if (const nlohmann::json a = run_.trainer->plan().aggregation_stats(); !a.empty()) d["aggregation"] = to_python(a);
    return d;
  }

  nb::dict ensemble() {
    if (!run_.test_loader) fail<ConfigError>("evaluate_ensemble scores the members on a test set; this data has none");
    train::EnsembleFigures f;
    {
      nb::gil_scoped_release release;
      f = train::evaluate_ensemble(*run_.trainer, *run_.test_loader);
    }
    nb::dict d;
    d["top1"] = f.top1;
    d["loss"] = f.loss;
    d["member_top1"] = f.member_top1;
    d["member_loss"] = f.member_loss;
    d["mean_member_top1"] = f.mean_member_top1();
    d["best_member_top1"] = f.best_member_top1();
    d["examples"] = f.examples;
    return d;
  }

  nb::dict evaluate() {
    train::EvalMetrics e;
    {
      nb::gil_scoped_release release;
      e = run_.trainer->evaluate();
    }
    return eval_dict(e);
  }
  double train_step(const Tensor& input, const Tensor& target) {
    nb::gil_scoped_release release;
    return run_.trainer->train_step({.input = input, .target = target});
  }
  Tensor predict(const Tensor& input) {
    nb::gil_scoped_release release;
    return run_.trainer->predict(input);
  }
  std::string save() {
    nb::gil_scoped_release release;
    return run_.trainer->save(0, 0);
  }

  train::TrainingRun& run() { return run_; }
  const train::Config& config() const { return config_; }
  bool python_model() const { return python_model_; }

 private:
  train::Config config_;
  train::TrainingRun run_;
  bool python_model_ = false;
  bool interrupt_check_ = false;
};

// braid.train(): sparse_linear through its servers, or a Trainer's fit.
nb::dict train_sparse(nb::handle config, nb::handle overrides) {
  train::Config c = make_config(config, overrides);
  // What chose this path (read, as braid train reads it, so it is not refused as unused).
  if (c.get_string("model.name") != "sparse_linear") fail<ConfigError>("train_sparse: model.name is not sparse_linear");
  train::SparseSummary s;
  {
    nb::gil_scoped_release release;
    s = train::train_sparse(c, [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    });
  }
  nb::dict d;
  d["steps"] = s.steps;
  d["train_seconds"] = s.train_seconds;
  d["samples_per_s"] = s.samples_per_s;
  d["world"] = s.workers;
  d["global_samples_per_s"] = s.samples_per_s * s.workers;
  d["rows_pulled"] = s.rows_pulled;
  d["leader"] = s.leader;
  if (s.has_eval) {
    nb::dict e;
    e["loss"] = s.test_loss;
    e["top1"] = s.test_top1;
    d["eval"] = e;
  }
  return d;
}

}  // namespace

void bind_train(nb::module_& m) {
  nb::module_ t = m.def_submodule("trainer", "The trainer (braid.Trainer and braid.train are the user's names).");
  t.def("config", [](nb::handle config, nb::handle overrides) { return to_python(make_config(config, overrides).to_json()); },
        "config"_a = nb::none(), "overrides"_a = nb::list(),
        "The effective configuration as a nested dict: defaults < file or dict < environment < overrides.");
  t.def("config_toml", [](nb::handle config, nb::handle overrides) { return make_config(config, overrides).to_toml(); },
        "config"_a = nb::none(), "overrides"_a = nb::list());
  t.def("train_sparse", &train_sparse, "config"_a, "overrides"_a = nb::list());

  nb::class_<parallel::Plan>(t, "Plan", "How one training step runs across the job (mesh, schedule, gradient sync, "
                                        "aggregation).")
      .def("describe", &parallel::Plan::describe)
      .def_prop_ro("mesh", &parallel::Plan::mesh, nb::rv_policy::reference_internal)
      .def_prop_ro("data_rank", &parallel::Plan::data_rank)
      .def_prop_ro("data_world", &parallel::Plan::data_world)
      .def_prop_ro("world_rank", &parallel::Plan::world_rank)
      .def_prop_ro("is_leader", &parallel::Plan::is_leader)
      .def_prop_ro("grad_sync", &parallel::Plan::grad_sync_name)
      .def_prop_ro("shard_name", &parallel::Plan::shard_name)
      .def("grad_norm", &parallel::Plan::grad_norm, release_gil(),
           "Global L2 norm of the whole model's gradient across shards (collective).")
      .def("aggregation_stats", [](const parallel::Plan& p) { return to_python(p.aggregation_stats()); })
      .def("step_stats", [](const parallel::Plan& p) { return to_python(p.step_stats()); })
      .def("__repr__", [](const parallel::Plan& p) { return "braid.Plan(" + p.describe() + ")"; });

  nb::class_<PyTrainer>(t, "Trainer")
      .def(nb::init<nb::handle, nb::handle, nb::object>(), "config"_a, "overrides"_a = nb::list(),
           "model"_a = nb::none())
      .def("report", &PyTrainer::report, "mode"_a = "")
      .def("add_callback", &PyTrainer::add_callback, "callback"_a)
      .def("fit", &PyTrainer::fit)
      .def("evaluate", &PyTrainer::evaluate)
      .def("evaluate_ensemble", &PyTrainer::ensemble)
      .def("train_step", &PyTrainer::train_step, "input"_a, "target"_a)
      .def("predict", &PyTrainer::predict, "input"_a)
      .def("save", &PyTrainer::save)
      .def_prop_ro("model", [](PyTrainer& tr) { return tr.run().model; })
      .def_prop_ro("optimizer", [](PyTrainer& tr) -> optim::Optimizer& { return tr.run().trainer->optimizer(); },
                   nb::rv_policy::reference_internal)
      .def_prop_ro("plan", [](PyTrainer& tr) -> parallel::Plan& { return tr.run().trainer->plan(); },
                   nb::rv_policy::reference_internal)
      .def_prop_ro("leader", [](PyTrainer& tr) { return tr.run().leader; })
      .def_prop_ro("step", [](PyTrainer& tr) { return tr.run().trainer->step(); })
      .def_prop_ro("device", [](PyTrainer& tr) { return tr.run().trainer->device(); })
      .def_prop_ro("train_examples", [](PyTrainer& tr) { return tr.run().train_examples; })
      .def_prop_ro("test_examples", [](PyTrainer& tr) { return tr.run().test_examples; })
      .def_prop_ro("out_dir", [](PyTrainer& tr) { return tr.run().out_dir; })
      .def_prop_ro("comm", [](PyTrainer& tr) -> std::optional<comm::Communicator> {
        if (!tr.run().group) return std::nullopt;
        return tr.run().group->comm();
      }, "The job's world communicator (None for one process).")
      .def_prop_ro("config", [](const PyTrainer& tr) { return to_python(tr.config().to_json()); });
}

}  // namespace braid::python
