// `braid pbt CONFIG [--set key=value ...]`: population-based training, one
// member per rank of the job (`braid launch -n 4 -- braid pbt CONFIG`). Each
// member trains the config alone from its own random hyper-parameters
// (pbt.* ranges) and seed, and every pbt.interval examples exploits and
// explores through the job's store (braid/train/pbt_member.h): no barrier
// until the end, where member 0 gathers and prints every member's result and
// lineage. See docs/training.md, "Population-based training".
#include <cstdio>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "braid/base/json_number.h"
#include "braid/base/thread_pool.h"
#include "braid/comm/env.h"
#include "braid/train/callbacks_console.h"
#include "braid/train/pbt_member.h"
#include "braid/train/trainer_setup.h"
#include "tools/braid/commands.h"

namespace braid::cli {

namespace {

train::HyperSpace search_space(const train::Config& c) {
  train::HyperSpace space;
  if (auto r = train::parse_range(c.get_string("pbt.lr"), "pbt.lr")) space["lr"] = *r;
  if (auto r = train::parse_range(c.get_string("pbt.momentum"), "pbt.momentum")) {
    if (r->hi >= 1) fail<ConfigError>("pbt.momentum = \"{}\": momentum must stay below 1", c.get_string("pbt.momentum"));
    r->log = false;
    space["momentum"] = *r;
  }
  if (auto r = train::parse_range(c.get_string("pbt.weight_decay"), "pbt.weight_decay")) space["weight_decay"] = *r;
  if (auto r = train::parse_range(c.get_string("pbt.batch_size"), "pbt.batch_size")) {
    r->power_of_two = true;
    space["batch_size"] = *r;
  }
  return space;
}

std::string lineage_text(const nlohmann::json& rounds) {
  std::string out;
  for (const auto& r : rounds) {
    if (r.value("exploit", false)) out += fmt::format(" r{}<-{}", json_integer<int64_t>(r["round"]), json_integer<int>(r["source"]));
  }
  return out.empty() ? " (own line)" : out;
}

void print_population(const std::vector<nlohmann::json>& finals) {
  std::printf("pbt: %zu members\n", finals.size());
  std::printf("%6s %10s %8s %9s %9s %9s %6s  lineage\n", "member", "validation", "test", "lr", "momentum",
              "w. decay", "batch");
  int best = 0;
  for (size_t i = 0; i < finals.size(); ++i) {
    const auto& f = finals[i];
    const auto& h = f["hyper"];
    auto field = [&](const char* k) { return h.contains(k) ? fmt::format("{:.4g}", h[k].get<double>()) : "-"; };
    std::printf("%6d %10.4f %8.4f %9s %9s %9s %6s %s\n", json_integer<int>(f["member"]), f["validation"].get<double>(),
                f["test"].get<double>(), field("lr").c_str(), field("momentum").c_str(), field("weight_decay").c_str(),
                field("batch_size").c_str(), lineage_text(f["rounds"]).c_str());
    if (f["validation"].get<double>() > finals[static_cast<size_t>(best)]["validation"].get<double>()) {
      best = static_cast<int>(i);
    }
  }
  const auto& b = finals[static_cast<size_t>(best)];
  std::printf("pbt: best member by validation: %d, test top-1 %.4f\n", json_integer<int>(b["member"]), b["test"].get<double>());
}

}  // namespace

void add_pbt(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "pbt", "population-based training: one member per rank (braid launch -n N -- braid pbt CONFIG)");
  struct Args {
    std::string config;
    std::vector<std::string> sets;
    std::string summary_json;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("config", args->config, "TOML config file with a [pbt] section (examples/configs/fashion_pbt.toml)")
      ->required();
  cmd->add_option("--set", args->sets, "override a key: --set pbt.interval=20000 (repeatable)");
  cmd->add_option("--summary-json", args->summary_json, "member 0 writes every member's result here as JSON");
  cmd->callback([args] {
    const comm::Env env = comm::read_env();
    const int member = env.rank, population = env.size;
    train::Config config = train::load_config(args->config, args->sets);
    if (config.get_int("data.validation") == 0) {
      fail<ConfigError>("braid pbt ranks members on held-out training examples: set data.validation (e.g. 5000)");
    }
    if (config.get_string("train.batch_schedule") != "none") {
      fail<ConfigError>("braid pbt searches the batch size itself; train.batch_schedule must be none");
    }
    const std::string base_dir = config.get_string("train.out_dir");
    const auto seed = static_cast<uint64_t>(config.get_int("train.seed"));
    const train::HyperSpace space = search_space(config);
    train::Hyper fixed{{"lr", config.get_float("optim.lr")},
                       {"batch_size", static_cast<double>(config.get_int("train.batch_size"))}};
    Generator draw(seed, /*stream=*/0x5eed00 + static_cast<uint64_t>(member));
    const train::Hyper start = train::sample_hyper(space, fixed, draw);
    // Each member trains alone, on its share of the host's cores, from its
    // own seed and starting point.
    const std::string where = fmt::format("member {} of braid pbt", member);
    config.set_text("parallel.strategy", "none", where);
    config.set_text("train.out_dir", fmt::format("{}/member-{}", base_dir, member), where);
    config.set_value("train.seed", static_cast<int64_t>(seed) + member, where);
    if (config.get_int("train.threads") == 0) {
      config.set_value("train.threads", int64_t{std::max(1, available_cores() / std::max(1, env.local_size))}, where);
    }
    config.set_value("optim.lr", start.at("lr"), where);
    config.set_value("train.batch_size", std::llround(start.at("batch_size")), where);
    for (const char* k : {"momentum", "weight_decay"}) {
      if (start.contains(k)) config.set_value(std::string("optim.") + k, start.at(k), where);
    }
    train::TrainingRun run = train::make_training_run(config);

    std::unique_ptr<train::Board> board;
    std::optional<comm::Store> store;
    if (env.source == "single") {
      board = std::make_unique<train::LocalBoard>();
    } else {
      store.emplace(comm::store_options(env));
      board = std::make_unique<train::StoreBoard>(store->clone(), population);
    }
    auto say = [](const std::string& line) {
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    };
    auto pbt = std::make_shared<train::PbtMember>(
        *run.trainer, *board, run.validation_loader,
        train::MemberOptions{.member = member,
                             .pbt = {.space = space,
                                     .fraction = config.get_float("pbt.fraction"),
                                     .perturb = config.get_float("pbt.perturb"),
                                     .exploit = config.get_bool("pbt.exploit")},
                             .interval = config.get_int("pbt.interval"),
                             .base_lr = start.at("lr"),
                             .lineage_path = config.get_string("train.out_dir") + "/lineage.jsonl",
                             .seed = seed + static_cast<uint64_t>(member),
                             .say = say},
        start);
    run.trainer->add_callback(pbt);
    run.trainer->add_callback(std::make_shared<train::ConsoleReporter>(
        train::console_mode(config.get_string("train.progress"), stdout)));
    // Member 0 waits this long for the others' results (a population of one has none to wait for).
    const std::chrono::duration<double> wait(store ? config.get_float("pbt.wait_s") : 0.0);
    config.refuse_unread("braid pbt");
    say(fmt::format("pbt member {} of {}: starts with {}", member, population,
                    nlohmann::json(start).dump()));
    const train::TrainSummary s = run.trainer->fit();

    nlohmann::json rounds = nlohmann::json::array();
    for (const train::Round& r : pbt->rounds()) rounds.push_back(train::to_json(r));
    const nlohmann::json final_result = {{"member", member},      {"validation", pbt->score()},
                                         {"test", s.has_eval ? s.last_eval.top1 : 0.0},
                                         {"hyper", pbt->hyper()}, {"start", start},
                                         {"rounds", rounds},      {"samples_per_s", s.samples_per_s}};
    std::vector<nlohmann::json> finals{final_result};
    if (store) {
      store->set(fmt::format("pbt/final/{}", member), final_result.dump());
      if (member != 0) return;
      std::vector<std::string> keys;
      for (int m = 0; m < population; ++m) keys.push_back(fmt::format("pbt/final/{}", m));
      // Members end at their own pace; the store's TimeoutError names the missing ones.
      store->wait(keys, Deadline::after(std::chrono::duration_cast<Duration>(wait)));
      finals.clear();
      for (const std::string& k : keys) finals.push_back(nlohmann::json::parse(store->get(k)));
    }
    print_population(finals);
    if (!args->summary_json.empty()) std::ofstream(args->summary_json) << nlohmann::json(finals).dump(1) << "\n";
  });
}

}  // namespace braid::cli
