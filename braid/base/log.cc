#include "braid/base/log.h"

#include <cstdlib>
#include <string>

namespace braid::logging {

void init(int rank) {
  std::string pattern = "[%H:%M:%S.%e] [%^%l%$] ";
  if (rank >= 0) pattern += "[rank " + std::to_string(rank) + "] ";
  spdlog::set_pattern(pattern + "%v");
  if (const char* level = std::getenv("BRAID_LOG_LEVEL")) {
    spdlog::set_level(spdlog::level::from_str(level));
  }
}

}  // namespace braid::logging
