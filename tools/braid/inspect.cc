// `braid inspect ...`: look at what braid would use, without training.
//   inspect config [CONFIG] [--set k=v] [--format table|json|toml]
//       every schema key: type, default, effective value, where it came from, help
//   inspect data [CONFIG] [--set k=v] [--epochs N]
//       the configured datasets' sizes and example layout, and the loader's
//       throughput over N training epochs (samples/s)
//   inspect safetensors FILE
//       a safetensors file's tensors and metadata, after checking its checksum
//   inspect checkpoint DIR [--step S] [--format table|json] [--consolidate OUT]
//       a run's checkpoints (inspect_checkpoint.cc)
//   inspect history DIR
//       what every rank was doing when a collective failed (inspect_history.cc)
//   inspect trace DIR [--out FILE]
//       the ranks' timelines merged into one Chrome trace (inspect_history.cc)
//   inspect schedule --schedule S --stages P --microbatches M [--chunks V]
//       a pipeline schedule's per-stage order and timeline (inspect_schedule.cc)
#include <cstdio>

#include "braid/base/deadline.h"
#include "braid/base/safetensors.h"
#include "braid/train/config.h"
#include "braid/train/config_data.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

struct ConfigArgs {
  std::string config;
  std::vector<std::string> sets;
  std::string format = "table";
  int64_t epochs = 1;
  std::string file;
};

void add_config_options(CLI::App* cmd, ConfigArgs& a) {
  cmd->add_option("config", a.config, "TOML config file (optional: defaults only)");
  cmd->add_option("--set", a.sets, "override a key: --set train.epochs=2 (repeatable)");
}

void print_config(const train::Config& c, const std::string& format) {
  if (format == "json") {
    std::printf("%s\n", c.to_json().dump(2).c_str());
    return;
  }
  if (format == "toml") {
    std::printf("%s", c.to_toml().c_str());
    return;
  }
  std::printf("%-24s %-7s %-36s %-36s %s\n", "key", "type", "default", "value", "source / help");
  for (const auto& k : c.schema().keys()) {
    std::string value = train::format_value(c.value(k.name));
    std::string src = c.source(k.name);
    std::string help = k.help;
    if (!k.env.empty()) help += fmt::format(" [env {}]", k.env);
    std::printf("%-24s %-7s %-36s %-36s %s%s\n", k.name.c_str(), std::string(train::type_name(k.type)).c_str(),
                train::format_value(k.default_value).c_str(), value.c_str(),
                src == "default" ? "" : fmt::format("({}) ", src).c_str(), help.c_str());
  }
}

std::string spec_text(const data::ExampleSpec& s) {
  return fmt::format("input {} {}, target {} {}", name(s.input_dtype), to_string(s.input_shape),
                     name(s.target_dtype), to_string(s.target_shape));
}

void inspect_data(const train::Config& c, int64_t epochs) {
  auto train_set = data::open_dataset(train::dataset_options(c, true));
  auto test_set = data::open_dataset(train::dataset_options(c, false));
  std::printf("dataset %s at %s\n", c.get_string("data.name").c_str(), c.get_string("data.path").c_str());
  std::printf("  train: %lld examples, %s\n", static_cast<long long>(train_set->size()),
              spec_text(train_set->spec()).c_str());
  std::printf("  test:  %lld examples\n", static_cast<long long>(test_set->size()));
  auto loader = train::make_train_loader(c, train_set);
  for (int64_t e = 0; e < epochs; ++e) {
    const auto start = Clock::now();
    int64_t samples = 0, batches = 0;
    loader->start_epoch(e);
    while (auto b = loader->next()) {
      samples += b->size();
      ++batches;
    }
    double s = seconds_since(start);
    std::printf("  loader epoch %lld: %lld batches of %lld, %d workers, augment %s: %.3f s, %.0f samples/s\n",
                static_cast<long long>(e), static_cast<long long>(batches),
                static_cast<long long>(c.get_int("train.batch_size")), static_cast<int>(c.get_int("data.workers")),
                c.get_bool("data.augment") ? "on" : "off", s, static_cast<double>(samples) / s);
  }
}

void inspect_safetensors(const std::string& path) {
  safetensors::File f = safetensors::read(path);
  std::printf("%s: %zu tensors, checksum ok\n", path.c_str(), f.tensors.size());
  for (const auto& [k, v] : f.metadata) std::printf("  metadata %s = %s\n", k.c_str(), v.c_str());
  for (const auto& [name, t] : f.tensors) {
    std::printf("  %-40s %-5s %s\n", name.c_str(), t.dtype.c_str(), fmt::format("{}", t.shape).c_str());
  }
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "show the config schema, datasets, a safetensors file, a run's checkpoints, collective histories or traces");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ConfigArgs>();

  auto* config = cmd->add_subcommand("config", "every config key: type, default, effective value, source, help");
  add_config_options(config, *args);
  config->add_option("--format", args->format, "table, json or toml")->check(CLI::IsMember({"table", "json", "toml"}));
  config->callback([args] { print_config(train::load_config(args->config, args->sets), args->format); });

  auto* data = cmd->add_subcommand("data", "dataset sizes, example layout and loader throughput");
  add_config_options(data, *args);
  data->add_option("--epochs", args->epochs, "loader epochs to time (0: none)")->check(CLI::NonNegativeNumber);
  data->callback([args] { inspect_data(train::load_config(args->config, args->sets), args->epochs); });

  auto* st = cmd->add_subcommand("safetensors", "list a safetensors file's tensors and metadata, verifying it");
  st->add_option("file", args->file, "a .safetensors file")->required();
  st->callback([args] { inspect_safetensors(args->file); });

  add_inspect_checkpoint(*cmd);
  add_inspect_history(*cmd);
  add_inspect_schedule(*cmd);
}

}  // namespace braid::cli
