// The reduced problem the search works on, and the record of how it was
// reduced so a model solution expands back to a full Problem solution.
//
// Reductions (reduce.cpp) keep the optimum: they only drop strategies no
// optimal solution needs, fix nodes left with one strategy, and eliminate
// nodes whose best choice given their neighbours never needs more memory than
// their smallest usage. Usage is stored as "residual" above each node's
// smallest usage; the smallest usages are folded into the capacity of each
// memory check point.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/solver/problem.h"

namespace tlm::solver {

using Clock = std::chrono::steady_clock;

struct Model {
  struct ModelEdge {
    int u = 0, v = 0;  // model node indices
    size_t off = 0;    // |S_u| x |S_v| row-major block of `mat`
  };
  int n = 0;
  std::vector<int> orig;     // model node -> problem node
  std::vector<size_t> off;   // strategies of node i: [off[i], off[i + 1])
  std::vector<int> strat;    // model strategy -> problem strategy index
  std::vector<Cost> cost;    // finite unary cost per model strategy
  std::vector<Usage> usage;  // residual usage (>= 0) per model strategy
  std::vector<int> plo, phi; // memory check points of node i: [plo, phi) (empty: no residual usage)
  std::vector<ModelEdge> edges;
  std::vector<Cost> mat;     // edge costs; kInfiniteCost = forbidden pair. Edges with equal
                             // matrices may share a block (matrix_pool.h): read-only once built
  std::vector<size_t> adj_off;
  std::vector<int> adj;      // incident edge ids per node
  std::vector<Usage> cap;    // per check point: usage_limit - fixed load (>= 0)
  std::vector<int64_t> point_time;
  __int128 offset = 0;       // cost of everything fixed or eliminated (at its best)

  int num_strategies(int i) const { return static_cast<int>(off[i + 1] - off[i]); }
};

struct Reduction {
  Model model;
  std::vector<int> fixed;  // problem node -> strategy if fixed by reduction, else -1
  struct Eliminated {
    int v = 0, u = 0, w = -1;  // v's choice depends on u (and w for degree-2)
    int sw_count = 1;          // |S_w| (problem strategies) for indexing
    std::vector<int> choice;   // [s_u] or [s_u * |S_w| + s_w] -> problem strategy of v
  };
  std::vector<Eliminated> eliminated;  // in elimination order
  std::string summary;                 // one line for logs

  // Full problem solution from a model solution (model strategy indices).
  Solution expand(const std::vector<int>& model_x) const;
  void offset_add(Cost c);
};

// The model with only the strategies where keep[k] (every node keeps at
// least one); `kept[k']` gives the original model strategy index (within its
// node) of the restricted model's strategy k'.
Model restrict_strategies(const Model& m, const std::vector<char>& keep, std::vector<int>* kept);
// Labels across a restriction `r` (with its `kept`): a labelling of the
// original model that uses only kept strategies, in r's indices; and back.
std::vector<int> to_restricted(const Model& r, const std::vector<int>& kept, const std::vector<int>& x);
std::vector<int> from_restricted(const Model& r, const std::vector<int>& kept, const std::vector<int>& y);

// Throws InfeasibleError naming the conflicting constraints. Dominance checks
// stop at `deadline` (the reduction is weaker then, still optimum-preserving).
Reduction reduce(const Problem& problem, bool eliminate = true, Clock::time_point deadline = Clock::time_point::max());

}  // namespace tlm::solver
