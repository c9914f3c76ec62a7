// The eager step measured with the plan's co-located workers computing at
// once (sim/predict.h, PredictOptions::measure_step): `braid launch -n K --
// braid sim CONFIG --measure-step FILE ...` starts K processes that each
// measure the step while the others do the same, each writing its figure to
// FILE.<rank>; the prediction is scaled to their mean.
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

void sim_measure_step_child(const train::Config& config, const std::string& out, int64_t batch, int threads) {
  const double s = sim::measure_eager_step(config, batch, threads);
  const char* rank = std::getenv("RANK");
  write_file_atomic(fmt::format("{}.{}", out, rank ? rank : "0"), fmt::format("{:.9g}\n", s));
}

std::function<double(const train::Config&, int64_t, int, int)> corun_measure() {
  return [](const train::Config& config, int64_t batch, int threads, int corun) {
    const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                      fmt::format("braid-sim-corun-{}", static_cast<long>(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string toml = (dir / "config.toml").string(), out = (dir / "step").string();
    write_file_atomic(toml, config.to_toml());
    const std::string exe = self_exe();
    const std::string cmd = fmt::format(
        "'{}' launch -n {} -- '{}' sim '{}' --measure-step '{}' --measure-batch {} --measure-threads {} > '{}' 2>&1",
        exe, corun, exe, toml, out, batch, threads, (dir / "launch.log").string());
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
