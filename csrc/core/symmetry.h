// Repeated blocks placed alike.
//
// A transformer's layers are one block repeated: the same ops on the same shapes,
// with the same strategies. The solver prices them alike, but a search stopped at a
// time limit leaves each layer wherever its last move put it, and a plan whose 80
// layers differ is hard to read, to compare with a hand plan, and to trust. After the
// solve every pattern one of the layers has, and their consensus (each node's most
// common label), is tried on all of them (the whole
// labelling evaluated, memory and boundaries between layers included); the cheapest
// feasible one replaces the solver's labelling unless the solver's is strictly
// cheaper, in which case the plan says by how much (an asymmetric plan that pays).
//
// A block is the IR nodes carrying one `extra.block` name (the exporter records the
// module path up to its first list index, "layers.3", on every node and parameter
// made inside it), with the recompute choices of its nodes (recompute.h) and the
// gradient sinks of its parameters (cost_tables.h). Blocks
// whose nodes match the most common block op for op and strategy for strategy are
// the repeated ones; the others (a first layer that differs) keep their labels.
#pragma once

#include <string>
#include <vector>

#include "core/cost_tables.h"
#include "core/graph.h"
#include "core/solver/solver.h"

namespace tlm {

struct SymmetryResult {
  int blocks = 0;          // repeated blocks found
  bool alike = true;       // the plan places them all alike
  double asymmetry_gain_s = 0;  // when not alike: how much cheaper than the best alike labelling
};

// The repeated blocks: each one's problem nodes (its IR nodes in graph order, each followed
// by its gradient sinks and recompute choices), so that position k of every block is the
// same op with the same strategies; blocks in forward order (by their first IR node).
struct RepeatedBlocks {
  std::vector<std::string> names;         // "layers.0", ...
  std::vector<std::vector<int>> members;  // per block, its problem nodes
};
RepeatedBlocks find_repeated_blocks(const Graph& g, const CostTables& t);

// Tries the repeated blocks' patterns on all of them; updates `r` (solution, cost, gap)
// when an alike labelling is no dearer.
SymmetryResult place_blocks_alike(const Graph& g, const CostTables& t, solver::SolveResult& r);

}  // namespace tlm
