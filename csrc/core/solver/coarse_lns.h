// Large-neighbourhood search on the coarse model (coarsen.h): re-solve a
// connected region of groups exactly with HiGHS while every other group
// keeps its strategy. Used when the whole coarse MILP is too large for
// HiGHS to make progress in the time there is.
//
// The region's memory rows are generated like the coarse MILP's: a point's
// capacity is its slack plus what the region's members use there now; rows
// are added for the points a candidate overfills, and the region is solved
// again (a few rounds at most). Only strict, memory-feasible improvements
// are kept, by exact evaluation.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/solver/coarsen.h"
#include "core/solver/model.h"
#include "core/solver/primal.h"

namespace tlm::solver {

struct CoarseLnsOptions {
  int region_groups = 200;        // coarse nodes per region
  size_t region_columns = 30000;  // MILP columns per region (strategies and edge pairs)
  int max_strategies = 12;        // per group: the current one and the cheapest others given the rest
};

class CoarseLns {
 public:
  CoarseLns(const Model& m, const Coarsening& c);
  // Connected region grown breadth-first from `center` within the budgets;
  // groups whose members do not follow one coarse strategy are left out.
  std::vector<int> region_from(int center, const Primal& primal, const CoarseLnsOptions& opt) const;
  // A coarse node with a member live at one of the tightest check points
  // (stored in `point` when given; -1 without memory points).
  int tight_center(const Primal& primal, std::mt19937_64& rng, int* point = nullptr) const;
  // `region` extended by groups with a member live at check point `k`, in
  // random order, within the budgets (which count `region` too).
  std::vector<int> region_live_at(int k, const Primal& primal, const CoarseLnsOptions& opt, std::mt19937_64& rng,
                                  std::vector<int> region = {}) const;
  // Re-solves `region`; true when `primal` improved.
  bool step(Primal& primal, const std::vector<int>& region, const CoarseLnsOptions& opt, double seconds, uint64_t seed);

  // `count` of group g's candidate strategies, given as (key, coarse
  // strategy) with the current one holding the smallest key: the current
  // one first, then up to half along the cost/memory trade-off curve
  // (cheapest to leanest), the rest the cheapest by key.
  std::vector<std::pair<Cost, int>> pick_candidates(int g, std::vector<std::pair<Cost, int>> cand, int count) const;

 private:
  const Model& m_;
  const Coarsening& c_;
  const Model& cm_;
};

}  // namespace tlm::solver
