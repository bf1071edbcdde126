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
  // the least cost per byte saved, until every point fits. False if stuck.
  bool repair();
  // Best-improvement single-node moves that keep memory feasible, until none
  // improves (or `max_moves` moves).
  void improve(size_t max_moves = SIZE_MAX);
  // Moves node i to strategy s (keeps loads and slack current).
  void move(int i, int s);
  // Exact cost change of moving node i to s (penalty for forbidden entries).
  __int128 delta(int i, int s) const;

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
