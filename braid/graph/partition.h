// Placement and partition: a graph whose nodes carry ranks is cut into one
// graph per rank, each cross-rank edge becoming a send on the producer's rank
// and a recv on the consumer's, lowered to the communicator's point-to-point
// calls. Every rank runs its graph in the original order, so a recv always
// waits for a value produced earlier in that order: the ranks cannot
// deadlock, and the partitioned graphs compute exactly what the whole did.
//
// Ranks come from placement hints during capture (op::Placement: a pipeline
// stage per layer; backward ops inherit their forward's), from
// place_by_work (contiguous pieces of the node order with equal work), and
// place_state_updates keeps everything that touches one parameter (its
// forward and backward reads, its update, its optimizer state) on one rank.
#pragma once

#include <vector>

#include "braid/comm/communicator.h"
#include "braid/graph/graph.h"

namespace braid::graph {

// Ranks by work: the node order cut into `ranks` contiguous pieces of about
// equal work (op costs). Then place_state_updates, which moves the nodes that
// touch a parameter to one rank (so pieces stop being exactly equal).
void place_by_work(Graph& graph, int ranks);
// Puts all the nodes that read or write one piece of updated state (a
// parameter, an optimizer buffer) on one rank: the rank of its first reader.
void place_state_updates(Graph& graph);

struct RankGraph {
  Graph graph;      // the rank's nodes, its sends and recvs; every input of the whole graph, in order
  int rank = 0;
  int sends = 0, recvs = 0;
  int64_t bytes_sent = 0;
};

// One graph per rank 0..ranks-1 (nodes must have rank < ranks).
std::vector<RankGraph> partition(const Graph& graph, int ranks);

// Runs `rank`'s graph with sends and recvs over `comm` (whose rank must be
// `rank`). Inputs bound as for the whole graph; returns the outputs this rank
// holds by name, and leaves the updates it owns applied.
std::vector<std::pair<std::string, Tensor>> run_partition(const RankGraph& part, comm::Communicator& comm,
                                                          const std::vector<Tensor>& inputs);

}  // namespace braid::graph
