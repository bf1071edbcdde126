#include "core/solver/merge.h"

#include <stdexcept>

#include "core/solver/coarse_milp.h"
#include "core/solver/coarsen.h"
#include "core/solver/milp.h"
#include "core/solver/trace.h"

namespace tlm::solver {

bool RecentPool::add(const std::vector<int>& x, __int128 cost) {
  for (size_t j = 0; j < members_.size(); ++j)
    if (costs_[j] == cost && members_[j] == x) return false;
  if (members_.size() < capacity_) {
    members_.push_back(x);
    costs_.push_back(cost);
  } else {
    members_[next_] = x;  // the oldest
    costs_[next_] = cost;
    next_ = (next_ + 1) % capacity_;
  }
  ++version_;
  return true;
}

MergeResult merge_solutions(const Model& m, const std::vector<std::vector<int>>& pool, std::vector<int>& best,
                            __int128& best_cost, Clock::time_point deadline, uint64_t seed, size_t max_columns,
                            const std::function<void(const std::vector<int>&, __int128)>& offer,
                            const std::function<bool()>& stop) {
  MergeResult res;
  std::vector<char> keep(m.strat.size(), 0);
  for (int i = 0; i < m.n; ++i) keep[m.off[i] + best[i]] = 1;
  for (const auto& x : pool)
    for (int i = 0; i < m.n; ++i) keep[m.off[i] + x[i]] = 1;
  for (int i = 0; i < m.n; ++i) {
    int kept = 0;
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) kept += keep[k];
    res.free_nodes += kept > 1;
  }
  if (res.free_nodes == 0) return res;
  std::vector<int> kept;
  const Model r = restrict_strategies(m, keep, &kept);
  std::vector<int> start = to_restricted(r, kept, best);
  Coarsening cs;
  try {
    cs = coarsen(r, best_cost);
  } catch (const std::logic_error&) {  // cannot happen for a real labelling's cost; skip rather than fail
    return res;
  }
  res.columns = milp_size(cs.coarse).first;
  trace("merge: %zu labellings, %d free nodes, %d groups, %zu MILP columns", pool.size() + 1, res.free_nodes,
        cs.coarse.n, res.columns);
  if (res.columns > max_columns) return res;
  __int128 cost = best_cost;
  CoarseMilpResult cr = coarse_milp_search(
      r, cs, start, cost, deadline, 1, seed,
      [&](const std::vector<int>& y, __int128 c) {
        best = from_restricted(r, kept, y);
        best_cost = c;
        res.improved = true;
        offer(best, best_cost);
      },
      stop);
  res.ran = cr.ran;
  return res;
}

}  // namespace tlm::solver
