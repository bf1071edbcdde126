// Solution merging: HiGHS over the strategies a few good labellings use.
//
// On memory-bound problems the searches end in different basins: each kick
// result trades memory between groups in its own way, and no single move
// combines the good trades of two of them. Restricting every node to the
// strategies that one of a few good labellings gives it leaves a model with
// one to a handful of choices per node, which folds into few groups
// (coarsen.h) and which the coarse MILP (coarse_milp.h) solves near exactly:
// the best recombination of the pool, memory rows and all.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/solver/model.h"

namespace tlm::solver {

// The `capacity` most recent distinct labellings (recent rather than
// cheapest: a pool of the cheapest fills with near-copies of the best).
class RecentPool {
 public:
  explicit RecentPool(size_t capacity) : capacity_(capacity) {}
  // False when `x` is already in the pool; a full pool drops its oldest member.
  bool add(const std::vector<int>& x, __int128 cost);
  const std::vector<std::vector<int>>& members() const { return members_; }
  size_t size() const { return members_.size(); }
  int version() const { return version_; }  // bumped by every change

 private:
  size_t capacity_;
  size_t next_ = 0;  // the oldest member of a full pool
  std::vector<std::vector<int>> members_;
  std::vector<__int128> costs_;
  int version_ = 0;
};

struct MergeResult {
  bool ran = false;           // the restricted model went to HiGHS
  bool improved = false;      // `best` was replaced by a cheaper labelling
  int free_nodes = 0;         // nodes left with more than one strategy
  size_t columns = 0;         // MILP columns of the folded restricted model
};

// Solves the model restricted to the strategies `best` or one of `pool`
// uses, starting from `best` (feasible, cost `best_cost`); each cheaper
// labelling found replaces `best` and is passed to `offer`. Skipped (ran =
// false) when the folded model has more than `max_columns` MILP columns.
MergeResult merge_solutions(const Model& m, const std::vector<std::vector<int>>& pool, std::vector<int>& best,
                            __int128& best_cost, Clock::time_point deadline, uint64_t seed, size_t max_columns,
                            const std::function<void(const std::vector<int>&, __int128)>& offer,
                            const std::function<bool()>& stop);

}  // namespace tlm::solver
