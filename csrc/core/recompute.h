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
// over intervals, edges, couplings), so every solver phase applies unchanged. A
// candidate value A (IR node a) whose liveness [a, last use] spans forward and
// backward is split into three problem nodes:
//   - A itself, over its forward span [a, last forward use];
//   - a hold node over the gap until backward makes it again: strategy 2s keeps
//     A's strategy s (its bytes, no cost), 2s + 1 recomputes it (no bytes, A's
//     compute under s as cost); a coupling makes A take strategy s;
//   - a tail node from then until its last use: A's bytes under s again (kept
//     or recomputed, backward holds it while it reads it); a coupling ties it to A.
// Kept everywhere, the three hold exactly the bytes A alone held before.
//
// Recomputing A needs its inputs in backward. An input backward reads anyway
// (kept or recomputed in turn), a parameter or an input is there. Any other
// input X -- the matmul under a linear's output view, say -- is recomputed with
// A: X gets a "need" node of 2 |S_X| strategies (2x: not needed, 2x + 1: made
// again in backward for X's compute under x), coupled to X, that A's recompute
// strategies require; X's own inputs follow the same rule. A value is a
// candidate if that closure reaches only such inputs through recomputable ops:
// single-output aten ops of forward, not random (a redraw would change the
// mask), not a local_map region, with a sharding rule.
//
// Inputs' moves. Each recomputed value takes its inputs as its producers left
// them: where a producer's value needs a move into the value's input spec, the
// recompute strategies pay that move again (backward issues the collective again
// before the recompute: the runtime tags it for recompute with the value), except
// where the producer's value comes from parameters alone (a weight, its cast, its
// transpose): that move is the parameter's gather, which backward makes anyway (FSDP
// re-gathers for the gradient's matmul), so it is free. A fixed policy
// (BoundaryPolicy::recompute_only: torchtitan's AC modes priced) prices its values alike.
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

// `candidates` less those whose recompute would chain too far. A recomputed value is made
// again as early as a recomputed user of it is, so a chain of candidates (a residual
// stream: each block's output reads the one before) would pull every value on it to
// backward's start, where its recompute frees nothing; add_recompute_choices counts those
// pulls conservatively. Walking users first, a candidate pulled more than a window before
// its own first backward read is kept instead, which ends the chain there: checkpoint
// segments, about 2 sqrt(backward's length) nodes long (sqrt(n) segments bound a chain's
// recompute memory best: Chen et al., "Training Deep Nets with Sublinear Memory Cost", 2016).
// Repeated blocks (IR extra.block) are cut alike: a value kept at its place in one block is
// kept at that place in all of them.
std::vector<int> cut_long_chains(const Graph& g, const std::vector<NodeStrategies>& strategies,
                                 const std::vector<int>& candidates);

// Splits each candidate's liveness into the three problem nodes above and adds the
// need nodes of their closures (appended after the problem's existing nodes), recorded
// in `t.recompute`. Requires the candidates' problem nodes to hold their full liveness
// (add_nodes). `forced`: each candidate is recomputed (its hold node may hold nothing).
void add_recompute_choices(const Graph& g, const std::vector<NodeStrategies>& strategies,
                           const std::vector<int>& candidates, CostTables& t, bool forced = false);

// Per IR node: whether the solver's labelling recomputes it.
std::vector<char> recomputed_nodes(const CostTables& t, size_t graph_nodes, const std::vector<int>& solution);

// Per IR node: what recomputing it costs under the labelling (its compute, and the
// moves of its inputs a fixed policy repeats); 0 where it is kept.
std::vector<solver::Cost> recompute_costs(const CostTables& t, size_t graph_nodes, const std::vector<int>& solution);

}  // namespace tlm
