// What `braid graph` (graph.cc) hands its partition and run half
// (graph_partition.cc).
#pragma once

#include <cstdint>
#include <string>

namespace braid::train {
class Config;
}  // namespace braid::train

namespace braid::cli {

struct GraphPartitionArgs {
  int ranks = 0;                 // 0: the job's world size
  std::string place = "stages";  // stages (the pipeline plan's cut) or work
  int64_t run = 0;               // steps to run; 0: only describe the partition
  int64_t print_every = 10;
  std::string dot;
};

void graph_partition(const train::Config& config, const GraphPartitionArgs& args);

}  // namespace braid::cli
