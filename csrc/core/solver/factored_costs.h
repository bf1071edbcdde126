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

#include <memory>
#include <vector>

#include "core/solver/model.h"

namespace tlm::solver {

struct FactoredBlock {
  int rows = 0, cols = 0;     // distinct rows and columns
  std::vector<int> row, col;  // strategy of u -> row class; strategy of v -> column class
  std::vector<double> k;      // rows x cols, row-major; +inf = forbidden
  double at(int s, int t) const { return k[static_cast<size_t>(row[s]) * cols + col[t]]; }
};

struct FactoredCosts {
  std::vector<FactoredBlock> blocks;
  std::vector<int> block_of_edge;  // model edge -> block (edges sharing a matrix share a block)
  const FactoredBlock& of(int e) const { return blocks[static_cast<size_t>(block_of_edge[e])]; }
};

// Factors every edge matrix of `m` once per distinct (block, shape).
std::shared_ptr<const FactoredCosts> factor_edge_costs(const Model& m);

// min over c < n of row[c] + add[c] (+inf when every term is): the inner loop
// of message passing. Four independent minima (min is exact, so the order
// does not change the result) instead of one dependent chain.
double min_plus(const double* row, const double* add, int n);

}  // namespace tlm::solver
