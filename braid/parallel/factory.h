// Strategies by name, as `parallel.strategy` names them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/parallel/allreduce.h"
#include "braid/parallel/ps.h"
#include "braid/parallel/strategy.h"

namespace braid::parallel {

struct StrategyOptions {
  std::string name = "none";
  DataParallelOptions data_parallel{};
  PsStrategyOptions ps{};
};

std::vector<std::string> strategy_names();

// `comm` may be invalid for "none"; "ps" talks over `transport` (the one under
// comm). Throws ConfigError for an unknown name, listing the known ones.
std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, comm::Communicator comm,
                                        std::shared_ptr<comm::Transport> transport = nullptr);

}  // namespace braid::parallel
