// Each `braid` subcommand lives in its own file and registers itself on the
// root CLI11 app through one of these functions; main.cc calls them all.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace braid::train {
class Config;
}  // namespace braid::train

namespace braid::cli {

// Set by a subcommand's callback; main returns it.
inline int exit_code = 0;

void add_version(CLI::App& app);
void add_inspect(CLI::App& app);
void add_inspect_checkpoint(CLI::App& inspect);  // inspect_checkpoint.cc, called by add_inspect
void add_inspect_history(CLI::App& inspect);     // inspect_history.cc (history and trace), called by add_inspect
void add_inspect_schedule(CLI::App& inspect);    // inspect_schedule.cc, called by add_inspect
void add_train(CLI::App& app);
// `braid train` under parallel.strategy = ensemble (train_ensemble.cc; train.cc calls it).
// dry_run: stop after setup (the config checked, every key read or refused).
void train_ensemble(const train::Config& config, const std::string& summary_json, bool dry_run);
void add_launch(CLI::App& app);
void add_bench_collective(CLI::App& app);
void add_ps(CLI::App& app);
void add_pbt(CLI::App& app);
void add_linear(CLI::App& app);
void add_graph(CLI::App& app);
void add_sim(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_generate(CLI::App& app);  // generate.cc: text from a language model (KV cache)
void add_eval(CLI::App& app);      // eval.cc: loss and perplexity on token ids
void add_export(CLI::App& app);    // export.cc: a gpt as a Hugging Face folder
void add_profile(CLI::App& app);   // profile.cc: a step's launches, syncs, allocations on the emulated GPU

// This program's own path (launch.cc): what a command starts more of itself with.
std::string self_exe();

}  // namespace braid::cli
