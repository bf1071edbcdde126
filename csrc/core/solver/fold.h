// A problem whose nodes come in tied classes, folded into one node per class.
//
// A transformer's 80 layers are one block repeated: placing them alike is what a user
// expects and what the planner reports (symmetry.h), and with every layer tied the
// search works on one layer's choices instead of eighty. Folding builds that smaller
// problem exactly for tied labellings:
// - a class's node costs add up, and so do the edges between two classes (an edge inside
//   one class becomes its diagonal, added to the node's costs);
// - memory is checked at the kept steps only (the caller keeps, say, every step outside
//   the repeated blocks and those of the first and the last block: with every block
//   labelled alike the load at a block's step is linear in the block's index, so the
//   end blocks bound the middle ones). Each member's interval shrinks to the kept steps
//   it covers; members left with the same interval add their usages, and each distinct
//   interval beyond the class's first is a cost-free "shadow" node that a coupling ties
//   to the class's node.
// The folded problem's optimum is the best tied labelling when the kept steps bound all
// the others; the caller evaluates the unfolded labelling on the full problem, which
// says whether they did.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/solver/problem.h"

namespace tlm::solver {

struct Folding {
  Problem problem;           // the folded problem
  std::vector<int> node_of;  // full problem node -> the folded node whose label it takes
  int shadows = 0;           // cost-free nodes that carry a class's other intervals
  size_t kept_steps = 0;     // memory check steps the folded problem keeps
  std::vector<int64_t> step;  // the full problem's step of each folded step below step.size()
  int64_t listed_steps = 0;   // keep_step.size(): folded step step.size() + k is full step listed_steps + k

  // The full problem's step of folded step `s`.
  int64_t full_step(int64_t s) const {
    return s < static_cast<int64_t>(step.size()) ? step[static_cast<size_t>(s)]
                                                 : listed_steps + (s - static_cast<int64_t>(step.size()));
  }
};

// `classes`: groups of full-problem nodes that take one label (each at least two nodes,
// all with the same number of strategies; a node in no group is its own class).
// `keep_step[t]`: whether memory is checked at step t (steps past its end are kept).
// A member's usage bounds forbid its class the strategies they rule out (the folded nodes
// carry none). Returns nullopt, with `why` set, when the classes cannot be tied (a member's
// strategy count differs from its class's, two members are pinned apart, or a node is in
// two classes).
std::optional<Folding> fold_problem(const Problem& problem, const std::vector<std::vector<int>>& classes,
                                    const std::vector<char>& keep_step, std::string* why);

// The full problem's labelling of a folded labelling.
Solution unfold(const Folding& folding, const Solution& folded);

}  // namespace tlm::solver
