// Block moves for the primal: re-optimise a whole forest of model nodes at
// once, exactly, while every other node keeps its strategy.
//
// Moves are made on a coarsening (coarsen.h): a "node" below is a group of
// model nodes that switch together; with the identity coarsening it is a
// single model node.
//
// A forest here is a set of nodes whose induced subgraph has no cycle, so
// min-sum dynamic programming over it is exact (one message per tree edge;
// edges to nodes outside the set are folded into unary costs). A single-node
// forest is the usual one-node move; a forest spanning most of the graph
// moves thousands of nodes jointly, which escapes the local minima one-node
// moves get stuck in on chains of resharding edges.
//
// Memory stays feasible by construction: a forest node may raise its usage
// only by an allowance, and allowances are handed out so that those of nodes
// live at the same check point never sum past the slack there. A move is
// accepted only when its exact (128-bit) cost change is negative.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "core/solver/coarsen.h"
#include "core/solver/model.h"
#include "core/solver/primal.h"

namespace tlm::solver {

class ForestMoves {
 public:
  // Both must outlive this object.
  ForestMoves(const Model& m, const Coarsening& c);
  // Every node its own group, reading the model's own edges (m must outlive
  // this object): the same moves as with identity_coarsening(m), without a
  // copy of its edge matrices (hundreds of megabytes on 3-D meshes).
  explicit ForestMoves(const Model& m);

  // Covers every node with a choice by random forests (about two or three
  // for sparse graphs) and re-optimises each. `price` (per model node, may
  // be empty) adds price * usage to the objective the DP minimises, to steer
  // memory; a forest's move is then accepted when that priced objective
  // falls (without a price: when the exact cost falls). Returns the number
  // of accepted forests.
  // With `respect_memory` false the memory limit is ignored (for estimating
  // the unconstrained optimum).
  int sweep(Primal& primal, std::mt19937_64& rng, const std::vector<double>* price = nullptr, bool respect_memory = true);

  // Memory repair by whole groups: at the most over-used point, move the
  // groups that save bytes there at the least exact cost per byte, until
  // every point fits. One-node repair cannot do this on chains of follow
  // edges: any single node leaving its group pays a huge entry. False if
  // stuck (the labelling is then still over the limit).
  bool repair(Primal& primal);

  // Exact cost change of moving group g (whose members follow coarse
  // strategy `cur` in x) to coarse strategy r, without moving anything: the
  // internal cost difference plus the fine edges leaving the group (inside
  // edges are in the coarse cost). nullopt when r would use a forbidden entry.
  std::optional<__int128> group_delta(const std::vector<int>& x, int g, int cur, int r) const;
  // Bytes group g saves at check point k moving from x to its coarse strategy r.
  __int128 saved_at(const std::vector<int>& x, int g, int r, int k) const;

  // Moves every member of g to coarse strategy r; returns the exact cost change.
  __int128 move_group(Primal& primal, int g, int r, std::vector<std::pair<int, int>>* undo) const;

  // Re-optimises the given forest of coarse nodes (they must induce no
  // cycle in the coarse graph). True when the move was accepted.
  bool optimise(Primal& primal, const std::vector<int>& forest, const std::vector<double>* price = nullptr,
                bool respect_memory = true);

 private:
  ForestMoves(const Model& m, std::unique_ptr<Coarsening> own);

  const Model& m_;
  std::unique_ptr<Coarsening> own_;  // the identity groups, for the single-node constructor
  const Coarsening& c_;
  const Model& cm_;  // c_.coarse, or m_ with single nodes (same nodes, costs and edges)
  std::vector<int> order_, in_forest_, parent_, parent_edge_, dsu_;
  // cm_'s matrices as doubles (+inf = forbidden): the DP's inner loops then
  // need no conversion or test per entry. Pooled matrices are small.
  std::vector<double> matd_;
  std::vector<double> belief_;
  // Per child and parent strategy, the least child belief + edge cost (the
  // upward message); the child's argmin is found only for the parent's
  // chosen strategy, in the downward pass.
  std::vector<double> up_;
  std::vector<int> cur_;
  std::vector<size_t> up_off_;
  std::vector<Usage> allow_;  // per fine node

  int find(int x);
};

}  // namespace tlm::solver
