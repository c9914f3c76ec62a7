// Logging through spdlog. Rank-aware: once a process knows its rank, every
// line carries it, so interleaved output from several workers stays readable.
#pragma once

#include <spdlog/spdlog.h>

namespace braid::logging {

// Sets the line pattern (with "[rank R]" when rank >= 0) and the level from
// BRAID_LOG_LEVEL (trace, debug, info, warn, error; default info).
void init(int rank = -1);

using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::trace;
using spdlog::warn;

}  // namespace braid::logging
