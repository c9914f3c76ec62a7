// What `braid graph` (graph.cc) hands its partition and run half
// (graph_partition.cc) and its picture writer (graph_svg.cc).
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
  std::string dot, svg;
};

void graph_partition(const train::Config& config, const GraphPartitionArgs& args);

// Writes `dot_text` to `dot_path` and renders it to `svg_path` with
// Graphviz's dot (graph_svg.cc); an empty path skips that file.
void write_graph_picture(const std::string& dot_text, const std::string& dot_path, const std::string& svg_path);

}  // namespace braid::cli
