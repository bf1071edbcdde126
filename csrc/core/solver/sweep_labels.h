// One sweep of iterated conditional modes over a model's labelling.
//
// A decode by message passing (dual.h: DualSolver::forward) labels nodes in order, each at
// its potential plus the edges to its labelled neighbours; a node left with no strategy
// compatible with them falls back to its own best, and the labelling then holds forbidden
// pairs. On a 70B problem's blocks (block_bound.h) the decoded labellings cost 15-50 times
// the blocks' bounds that way, and the memory loads read from them are no minimiser's.
#pragma once

#include <vector>

#include "core/solver/model.h"

namespace tlm::solver {

// Each node in turn (model order) takes its cheapest strategy given its neighbours' current
// labels: `unary[k]` (per model strategy: the cost the caller prices it at) plus the edges'
// costs. Its labelling never costs more at those prices afterwards, and a forbidden pair
// stays only where one of its nodes has no strategy compatible with every neighbour.
void sweep_labels(const Model& m, const std::vector<double>& unary, std::vector<int>& labels);

}  // namespace tlm::solver
