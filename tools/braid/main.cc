// The `braid` command: train, launch, bench, ps, pbt, linear, graph, inspect, version.
#include <cstdio>

#include "braid/base/error.h"
#include "braid/base/log.h"
#include "tools/braid/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"braid: distributed deep-learning training"};
  app.require_subcommand(1);
  braid::cli::add_version(app);
  braid::cli::add_inspect(app);
  braid::cli::add_train(app);
  braid::cli::add_launch(app);
  braid::cli::add_bench_collective(app);
  braid::cli::add_ps(app);
  braid::cli::add_pbt(app);
  braid::cli::add_linear(app);
  braid::cli::add_graph(app);
  braid::cli::add_sim(app);
  braid::cli::add_tokenize(app);
  braid::cli::add_generate(app);
  braid::cli::add_eval(app);
  braid::cli::add_export(app);
  braid::cli::add_profile(app);
  try {
    braid::logging::init();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const braid::Error& e) {
    std::fprintf(stderr, "braid: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "braid: unexpected error: %s\n", e.what());
    return 1;
  }
  return braid::cli::exit_code;
}
