#include "braid/parallel/factory.h"

namespace braid::parallel {

std::vector<std::string> strategy_names() { return {"none", "allreduce", "ps"}; }

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options, comm::Communicator comm,
                                        std::shared_ptr<comm::Transport> transport) {
  if (options.name == "none") return std::make_unique<LocalStrategy>();
  if (options.name == "allreduce") return std::make_unique<AllreduceStrategy>(std::move(comm), options.data_parallel);
  if (options.name == "ps") {
    if (!transport) fail<ConfigError>("parallel.strategy = ps needs the job's transport");
    return std::make_unique<PsStrategy>(std::move(transport), options.ps);
  }
  fail<ConfigError>("unknown parallel.strategy '{}' (known: {})", options.name, strategy_names());
}

}  // namespace braid::parallel
