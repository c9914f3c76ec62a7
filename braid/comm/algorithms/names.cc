#include "braid/comm/algorithms/algorithms.h"

namespace braid::comm {

std::string_view name(Algorithm a) {
  switch (a) {
    case Algorithm::automatic: return "auto";
    case Algorithm::ring: return "ring";
    case Algorithm::recursive_doubling: return "recursive_doubling";
    case Algorithm::halving_doubling: return "halving_doubling";
    case Algorithm::binary_tree: return "binary_tree";
    case Algorithm::double_binary_tree: return "double_binary_tree";
    case Algorithm::binary_blocks: return "binary_blocks";
    case Algorithm::direct: return "direct";
    case Algorithm::hierarchical: return "hierarchical";
    case Algorithm::shared_memory: return "shared_memory";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view s) {
  if (s == "auto") return Algorithm::automatic;
  for (Algorithm a : kAllreduceAlgorithms)
    if (name(a) == s) return a;
  fail<ValueError>("unknown algorithm '{}' (auto, ring, recursive_doubling, halving_doubling, binary_tree, "
                   "double_binary_tree, binary_blocks, direct, hierarchical, shared_memory)", s);
}

}  // namespace braid::comm
