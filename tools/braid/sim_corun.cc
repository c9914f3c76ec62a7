// The eager step measured with the plan's co-located workers computing at
// once (sim/predict.h, PredictOptions::measure_step): `braid launch -n K --
// braid sim CONFIG --measure-step FILE ...` starts K processes that each
// measure the step over the same window of time, each writing its figure to
// FILE.<rank>; the prediction is scaled to their mean.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "braid/base/atomic_file.h"
#include "braid/base/error.h"
#include "braid/sim/step_profile.h"
#include "tools/braid/commands.h"
#include "tools/braid/sim_command.h"

namespace braid::cli {

namespace {

// Room for the copies to start, load the data and warm up (a CNN's warm-up
// steps take about half a second here).
constexpr auto kStartAfter = std::chrono::seconds(3);

}  // namespace

void sim_measure_step_child(const train::Config& config, const std::string& out, const sim::EagerStep& how) {
  const double s = sim::measure_eager_step(config, how);
  const char* rank = std::getenv("RANK");
  write_file_atomic(fmt::format("{}.{}", out, rank ? rank : "0"), fmt::format("{:.9g}\n", s));
}

std::function<double(const train::Config&, const sim::EagerStep&, int)> corun_measure() {
  return [](const train::Config& config, const sim::EagerStep& how, int corun) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      fmt::format("braid-sim-corun-{}", static_cast<long>(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string toml = (dir / "config.toml").string(), out = (dir / "step").string();
    write_file_atomic(toml, config.to_toml());
    const std::string exe = self_exe();
    // One start for every copy, past their start-up and warm-up, so their
    // windows overlap (the steady clock is this host's, the same in each).
    const auto start = std::chrono::steady_clock::now() + kStartAfter;
    const std::string cmd = fmt::format(
        "'{}' launch -n {} -- '{}' sim '{}' --measure-step '{}' --measure-batch {} --measure-threads {} "
        "--measure-microbatches {} --measure-start {} > '{}' 2>&1",
        exe, corun, exe, toml, out, how.batch, how.threads, how.microbatches, start.time_since_epoch().count(),
        (dir / "launch.log").string());
    if (const int rc = std::system(cmd.c_str()); rc != 0) {
      fail<Error>("braid sim: measuring the step with {} ranks side by side failed (exit {}); see {}", corun, rc,
                  (dir / "launch.log").string());
    }
    double sum = 0;
    for (int r = 0; r < corun; ++r) {
      std::ifstream in(fmt::format("{}.{}", out, r));
      double s = 0;
      if (!(in >> s) || !(s > 0)) fail<Error>("braid sim: rank {} of the side-by-side measurement wrote no time", r);
      sum += s;
    }
    std::filesystem::remove_all(dir);
    return sum / corun;
  };
}

}  // namespace braid::cli
