// Feasible labellings of the reduced model: memory repair and local search.
//
// Costs are exact (__int128). A forbidden edge entry counts as a large
// penalty so the search first removes conflicts, then cost; the memory limit
// is kept as a hard constraint through per-point slack (capacity - load).
#pragma once

#include <cstdint>
#include <vector>

#include "core/solver/model.h"
#include "core/solver/slack_tree.h"

namespace tlm::solver {

class Primal {
 public:
  explicit Primal(const Model& m);

  void set(const std::vector<int>& labels);
  const std::vector<int>& labels() const { return x_; }
  __int128 cost() const;  // including conflict penalties
  int conflicts() const;  // forbidden edge entries in use
  bool memory_ok() const { return slack_.size() == 0 || slack_.global_min() >= 0; }
  bool feasible() const { return memory_ok() && conflicts() == 0; }

  // Greedy: at the most over-used point, move live nodes to smaller usage at
  // the least cost per byte saved, until every point fits. False if stuck (or at `deadline`).
  bool repair(Clock::time_point deadline = Clock::time_point::max());
  // Moves nodes off forbidden entries: per forbidden entry, the cheapest chain move
  // (chain_move) of one of its two nodes that leaves no point less slack than the least
  // before, else the one that leaves the most, and then the memory repair; three rounds
  // at most, until `deadline`. True when no forbidden entry is left.
  bool clear_conflicts(Clock::time_point deadline = Clock::time_point::max());
  // Best-improvement single-node moves that keep memory feasible, until none
  // improves (or `max_moves` moves).
  void improve(size_t max_moves = SIZE_MAX);
  // Moves node i to strategy s (keeps loads and slack current).
  void move(int i, int s);
  // Exact cost change of moving node i to s (penalty for forbidden entries).
  __int128 delta(int i, int s) const;
  // Moves node i to s, then each node that move leaves on a forbidden entry to its
  // cheapest strategy given the rest, breadth-first, at most `max_nodes` nodes in all:
  // couplings (a recompute candidate, its hold and tail nodes) change together, which
  // single-node moves cannot do. False when a moved node is left on a forbidden entry;
  // `change` gets the exact cost change, `undo` (node, old strategy), oldest first.
  static constexpr size_t kChainNodes = 64;
  bool chain_move(int i, int s, std::vector<std::pair<int, int>>& undo, __int128& change,
                  size_t max_nodes = kChainNodes);
  void undo(const std::vector<std::pair<int, int>>& moves);

  // Least slack (capacity - load) over check points [l, r).
  __int128 slack_min(int l, int r) const { return slack_.min(l, r); }
  const SlackTree& slack_tree() const { return slack_; }
  // Check points sorted by slack, tightest first (at most `count`).
  std::vector<int> tightest_points(size_t count) const;

  static constexpr __int128 kConflict = static_cast<__int128>(1) << 90;

 private:
  const Model& m_;
  std::vector<int> x_;
  SlackTree slack_;
  __int128 entry(int e, int su, int sv) const;
};

}  // namespace tlm::solver
