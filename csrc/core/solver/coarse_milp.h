// Exact search on the coarse model (coarsen.h) through HiGHS, with the
// memory rows generated on demand.
//
// The coarse model is small (contest graphs of 30,000 nodes fold into a few
// hundred groups) but its memory rows are not: every fine check point is a
// row touching every group live there. So the MILP starts with the rows of
// the tightest points of the best labelling; each solution HiGHS returns is
// expanded and checked against every fine point, the most violated points
// become rows, and the MILP is solved again. A solution that fits every
// point is feasible; one HiGHS proved optimal is the optimum of all
// labellings cheaper than the coarsening's UB. Every round's dual bound is a
// valid lower bound (fewer rows only relax the problem).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/solver/coarsen.h"
#include "core/solver/milp.h"
#include "core/solver/model.h"

namespace tlm::solver {

struct CoarseMilpResult {
  bool ran = false;
  bool optimal = false;   // the returned best is optimal (among labellings cheaper than the coarsening's UB)
  long double bound = -1e300L;  // lower bound in model units (without offset)
  int rounds = 0;
  size_t rows = 0;
};

// `best`/`best_cost`: a feasible fine labelling of cost <= the coarsening's
// UB (updated in place when something cheaper is found; `offer` is called
// for each). Stops at `deadline` or `stop()`. The MILP starts with the rows
// of the `initial_rows` tightest points of `best`.
CoarseMilpResult coarse_milp_search(const Model& m, const Coarsening& c, std::vector<int>& best, __int128& best_cost,
                                    Clock::time_point deadline, int threads, uint64_t seed,
                                    const std::function<void(const std::vector<int>&, __int128)>& offer,
                                    const std::function<bool()>& stop, size_t initial_rows = 40);

}  // namespace tlm::solver
