#include "braid/parallel/factory.h"

namespace braid::parallel {

std::vector<std::string> strategy_names() { return {"none", "allreduce"}; }

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, comm::Communicator comm) {
  if (options.name == "none") return std::make_unique<LocalStrategy>();
  if (options.name == "allreduce") return std::make_unique<AllreduceStrategy>(std::move(comm), options.data_parallel);
  fail<ConfigError>("unknown parallel.strategy '{}' (known: {})", options.name, strategy_names());
}

}  // namespace braid::parallel
