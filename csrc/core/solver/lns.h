// Large-neighbourhood search: re-solve a connected region of the model
// exactly with HiGHS while every other node keeps its strategy. The region's
// memory capacity is what the fixed nodes leave at each check point, so every
// accepted step stays feasible and never costs more.
#pragma once

#include <cstdint>
#include <vector>

#include "model.h"
#include "primal.h"

namespace tlm::solver {

struct LnsOptions {
  uint64_t seed = 0;
  int region_nodes = 80;           // nodes per neighbourhood
  size_t region_columns = 6000;    // MILP columns per neighbourhood (edge pairs included)
  double step_seconds = 1.0;       // HiGHS time per neighbourhood
};

// Connected region grown breadth-first from `center` within the budgets.
std::vector<int> bfs_region(const Model& m, int center, const LnsOptions& options);
// Re-solves `region` (distinct model nodes); true when it improved `primal`.
bool lns_step(const Model& m, Primal& primal, std::vector<int> region, const LnsOptions& options, double seconds);

}  // namespace tlm::solver
