// Ranks must train the same model with the same configuration. Before the
// first step every rank shares a JSON description (config + parameter names
// and shapes) and compares it with rank 0's.
#pragma once

#include <nlohmann/json.hpp>

#include "braid/comm/communicator.h"

namespace braid::parallel {

// Collective. Throws ConfigError naming the ranks that differ from rank 0 and
// the first differing key (a JSON pointer such as /params/3/shape) with both
// values.
void check_agreement(comm::Communicator& comm, const nlohmann::json& description, Duration timeout);

// The first JSON pointer at which a and b differ, with both values; empty when equal.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace braid::parallel
