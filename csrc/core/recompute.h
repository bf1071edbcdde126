// Activation recompute as a solver decision, beside the placements.
//
// A value that backward reads is normally kept from its forward use until its
// backward use: on a long model those values are the step's peak. Recomputing
// one in backward frees its bytes over that span for its compute a second time.
// torchtitan's full / selective AC pick the values by module and op type; here
// the solver picks per value, under the memory limit, jointly with every node's
// sharding, with the same certified gap.
//
// The decision is written in the solver's own terms (strategies with usages
// over intervals), so every solver phase applies unchanged. A candidate value A
// (IR node a) whose liveness [a, last use] spans forward and backward is split
// into three problem nodes:
//   - A itself, over its forward span [a, last forward use];
//   - a hold node over the gap until backward first reads it (or recomputes a
//     user that reads it, when that user is a candidate too): strategy 2s keeps
//     A's strategy s (its bytes, no cost), 2s + 1 recomputes it (no bytes, A's
//     compute under s as cost); a coupling makes A take strategy s;
//   - a tail node over its backward span [first backward use, last use]: A's
//     bytes under s again (kept or recomputed, backward holds it while it reads
//     it); a coupling ties it to A.
// Kept everywhere, the three hold exactly the bytes A alone held before.
//
// Which values may be recomputed: single-output aten ops of forward, not random
// (a redraw would change the mask), not a local_map region, with a sharding
// rule, whose every tensor input is a placeholder or a value backward reads
// too (kept or recomputed, it is there when A is recomputed, so recomputing A
// never keeps another value alive). A recomputed value is recomputed from its
// inputs as the producer left them: the hold node's recompute strategies are
// forbidden with any producer strategy whose move into A's input spec costs
// something (a collective, recomputed in backward, would be a second
// communication the runtime's partitioner saves instead).
#pragma once

#include <cstdint>
#include <vector>

#include "core/cost_tables.h"
#include "core/graph.h"
#include "core/strategy.h"

namespace tlm {

// When forward last reads a node's value (the node itself if never), when backward
// first reads it (-1: never) and its last read; the output node counts as forward.
// Forward and backward are the IR's "backward" marks (the joint graph's partitioner tags).
struct ValueUses {
  int last_forward = -1, first_backward = -1, last = -1;
};
std::vector<ValueUses> value_uses(const Graph& g);

// When backward must make each value of `recomputed` again (-1 for the others): just
// before its first backward read, or earlier where a recomputed user of it is made
// again first (recomputing that user reads it).
std::vector<int> remade_at(const Graph& g, const std::vector<ValueUses>& uses, const std::vector<char>& recomputed);

// IR nodes that may be recomputed (see above), ascending.
std::vector<int> recompute_candidates(const Graph& g, const std::vector<NodeStrategies>& strategies);

// Splits each candidate's liveness into the three problem nodes above (appended
// after the problem's existing nodes) and records them in `t.recompute`.
// Requires the candidates' problem nodes to hold their full liveness (add_nodes).
void add_recompute_choices(const Graph& g, const std::vector<int>& candidates, CostTables& t);

// Per IR node: whether the solver's labelling recomputes it.
std::vector<char> recomputed_nodes(const CostTables& t, size_t graph_nodes, const std::vector<int>& solution);

}  // namespace tlm
