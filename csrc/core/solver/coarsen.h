// Groups of model nodes that must move together, found once a feasible
// labelling of cost UB is known.
//
// Contest and planner graphs are full of "follow" edges: each strategy of u
// has exactly one affordable partner in v (the same sharding), every other
// entry being a resharding so expensive that no solution cheaper than UB can
// pay it. An entry (or node strategy) is unaffordable when the sum of every
// other node's and edge's minimum plus its own value already exceeds UB.
// Over the affordable entries such an edge is a bijection, and a connected
// set of bijection edges is a group whose strategy is fixed by one member
// (its root). Single-node moves cannot switch a group (any partial switch
// pays the huge entries), so local search moves whole groups instead.
//
// The coarse model has one node per group (singletons included), one
// strategy per consistent root strategy, the group's internal cost as unary
// cost, and summed edge matrices between groups. It carries no memory data:
// moves are checked on the fine model, member by member.
#pragma once

#include <stdexcept>
#include <vector>

#include "core/solver/model.h"

namespace tlm::solver {

struct Coarsening {
  Model coarse;                       // groups as nodes; cap empty
  std::vector<int> group_of;          // fine node -> coarse node
  std::vector<size_t> member_off;     // coarse node g -> members[member_off[g] .. member_off[g + 1])
  std::vector<int> members;           // fine nodes, root first
  std::vector<size_t> map_off;        // member slot -> fine strategy of each coarse strategy
  std::vector<int> map;               // map[map_off[slot] + r] = fine strategy index
  std::vector<size_t> slot_of;        // fine node -> its member slot
  int grouped_nodes = 0;              // fine nodes in groups of two or more

  int fine_strategy(size_t slot, int r) const { return map[map_off[slot] + r]; }
  // The coarse strategy group g's members follow in fine labelling x; -1
  // when they follow none (a member moved alone).
  int label_of(int g, const std::vector<int>& x) const;
};

// Sum of every node's and edge's cheapest entry: no labelling costs less.
__int128 sum_of_minima(const Model& m);

// The "practically forbidden" scale of a model, when it has one: exports
// mark impossible choices with finite costs many orders of magnitude above
// every real one (1e18 beside 1e3..1e10). Returns the power of ten at the
// bottom of the highest gap of at least three empty decades in the
// magnitudes of the positive entries, or -1 when there is no such gap.
__int128 huge_cost_threshold(const Model& m);

// Every node its own group (the coarse model equals the fine one, without
// memory). Without edges the coarse model has the nodes and costs only.
Coarsening identity_coarsening(const Model& m, bool with_edges = true);
// Thrown by coarsen() past its deadline: on 3-D meshes one coarsening takes
// seconds, more than a tight time limit has left.
struct CoarsenTimeout : std::runtime_error {
  CoarsenTimeout() : std::runtime_error("coarsen: deadline passed") {}
};

// Groups under the affordability test for a labelling of cost `ub` (model units).
Coarsening coarsen(const Model& m, __int128 ub, Clock::time_point deadline = Clock::time_point::max());

}  // namespace tlm::solver
