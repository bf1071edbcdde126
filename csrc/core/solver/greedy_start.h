// A first labelling in one pass, so a time-limited solve always has a plan to
// return: however large the model and however short the limit, the search
// starts from it instead of from nothing.
#pragma once

#include <vector>

#include "core/solver/model.h"

namespace tlm::solver {

// Nodes in model order (the problem's time order: producers before
// consumers); each takes the strategy of least unary cost plus edge costs to
// the neighbours already labelled, avoiding forbidden pairs where it can and
// breaking ties by smaller usage. Cost: one pass over the edge matrices.
// The result may still violate the memory limit or use a forbidden pair when
// every choice of some node does; callers repair it (primal.h).
// `lean`: smaller usage before smaller cost (still avoiding forbidden pairs first): the
// start for a memory-bound model whose cheap start no repair brings under the limit
// without forbidden pairs (each activation recomputed where its producers allow).
std::vector<int> greedy_labels(const Model& m, bool lean = false);

// A lower bound in one pass: every node at its cheapest strategy and every
// edge at its cheapest allowed entry, memory ignored. Weak, but it gives a
// time-limited solve a finite gap before message passing has run.
long double separable_bound(const Model& m);

}  // namespace tlm::solver
