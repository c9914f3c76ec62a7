// Strategies by name, as `parallel.strategy` names them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "braid/parallel/allreduce.h"
#include "braid/parallel/strategy.h"

namespace braid::parallel {

struct StrategyOptions {
  std::string name = "none";
  DataParallelOptions data_parallel{};
};

std::vector<std::string> strategy_names();

// `comm` may be invalid for "none". Throws ConfigError for an unknown name,
// listing the known ones.
std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, comm::Communicator comm);

}  // namespace braid::parallel
