// Edge matrices factored into their distinct rows and columns, for message
// passing (dual.h).
//
// A planner edge matrix repeats itself: every strategy of the producer with
// the same output spec has the same row, every strategy of the consumer with
// the same input spec the same column. On a 3-D mesh a node has hundreds of
// strategies but tens of distinct specs, so a block of |S_u| x |S_v| entries
// is a small matrix K[row class][column class] spread by two index arrays.
// A min-marginal over the block is then min over K plus a min over each
// class, |S_u| + |S_v| + |K| operations instead of |S_u| x |S_v|, with the
// same result to the bit (adding a constant keeps the order of doubles).
#pragma once

#include <algorithm>
#include <limits>
#include <memory>
#include <vector>

#include "core/solver/min_plus.h"
#include "core/solver/model.h"

namespace tlm::solver {

// One block, pointing into its FactoredCosts' pools.
struct FactoredBlock {
  int rows = 0, cols = 0;        // distinct rows and columns
  const int* row = nullptr;      // strategy of u -> row class (|S_u| entries)
  const int* col = nullptr;      // strategy of v -> column class (|S_v| entries)
  const double* k = nullptr;     // rows x cols, row-major; +inf = forbidden
  // No two rows (columns) equal: row[s] == s (col[t] == t), and message
  // passing skips the class step (small random blocks rarely repeat).
  bool identity_rows = false, identity_cols = false;
  double at(int s, int t) const { return k[static_cast<size_t>(row[s]) * cols + col[t]]; }
};

struct FactoredCosts {
  std::vector<FactoredBlock> blocks;
  std::vector<int> block_of_edge;  // model edge -> block (edges sharing a matrix share a block)
  // Every block's entries and classes, contiguous in the order of first use
  // (a pass of messages walks them in that order; a heap block per edge
  // cost more in cache misses than the passes' arithmetic on small blocks).
  std::vector<double> k_pool;
  std::vector<int> class_pool;

  FactoredCosts() = default;
  FactoredCosts(const FactoredCosts&) = delete;  // blocks point into the pools
  FactoredCosts& operator=(const FactoredCosts&) = delete;
  const FactoredBlock& of(int e) const { return blocks[static_cast<size_t>(block_of_edge[e])]; }
};

// Factors every edge matrix of `m` once per distinct (block, shape).
std::shared_ptr<const FactoredCosts> factor_edge_costs(const Model& m);

}  // namespace tlm::solver
