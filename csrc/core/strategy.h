// Sharding strategies per aten op on an N-D mesh.
//
// A strategy fixes the placement spec of every tensor input (in
// IrNode::tensor_inputs order) and every tensor output. Rules are written per
// mesh dim ("single-dim strategies") and combined across mesh dims, pruning
// invalid combinations, so 3-D and 4-D meshes stay practical.
#pragma once

#include <string>
#include <vector>

#include "core/graph.h"

namespace tlm {

struct OpStrategy {
  std::vector<PlacementSpec> inputs;   // one per IrNode::tensor_inputs
  std::vector<PlacementSpec> outputs;  // one per IrNode::outputs
};

struct StrategyOptions {
  // Ops without a rule get a replicate-only strategy (true) or raise NoStrategyError (false).
  bool fallback_replicate = true;
};

struct NodeStrategies {
  std::vector<OpStrategy> strategies;  // deterministic order, no duplicates, never empty
  bool fell_back = false;              // replicate-only fallback was used
  std::string family;                  // op family name, for per-family counts ("matmul", "pointwise", ...)
  // An earlier node with the same strategy signature (strategy_signature.h), whose
  // strategies these are a copy of: the cost tables copy its prices too. -1: none.
  int same_as = -1;
};

// No rule for an op and fallback disabled. The message names the op and the
// node and suggests wrapping the code in torch_localmap.local_map.
struct NoStrategyError : InvalidArgument {
  using InvalidArgument::InvalidArgument;
};

// Strategies for node `id`. Placeholders get every R/S spec of their shape;
// nodes with fixed placements (local_map regions) get exactly those.
// The "output" node is handled by the planner, not here.
NodeStrategies enumerate_strategies(const Graph& g, int id, const StrategyOptions& options = {});

// Strategies of every node in one pass (the "output" node gets an empty
// entry with family "output"). Unlike per-node calls, this drops strategies
// that need a Partial kind on an input that the input's producer can never
// emit where another strategy does as well (combine in strategy.cpp; a bias
// beside a sharded contraction is kept), which keeps counts practical on
// 3-D/4-D meshes. The planner should use this.
std::vector<NodeStrategies> enumerate_graph_strategies(const Graph& g, const StrategyOptions& options = {});

// Ops with a sharding rule, sorted (coverage reports, verification bookkeeping).
std::vector<std::string> ops_with_rules();

// Every Replicate/Shard spec of a tensor of `shape` on `mesh` (what a
// placeholder may be placed as), in deterministic order; replicated first.
std::vector<PlacementSpec> all_rs_specs(const std::vector<int64_t>& shape, const Mesh& mesh);

// Work of one op under a strategy, on the largest local shard: floating point
// operations and bytes read + written. The cost model turns it into time.
struct OpWork {
  double flops = 0;
  double bytes = 0;
  // A contraction's smallest local dimension (M, N or K; cost_model.h: matmul_half_dim);
  // 0 for other ops.
  double min_dim = 0;
  // Attention only: the head width E its products contract (cost_model.h:
  // attention_half_dim), and for causal attention the keys each query may see at most
  // (flops count the half below the diagonal; cost_model.h: attention_causal_tile). 0 else.
  double head_dim = 0;
  double causal_keys = 0;
};
OpWork op_work(const Graph& g, int id, const OpStrategy& s);

// The node's args/kwargs as the op must be called on the rank at mesh
// coordinate `coord`: shape-valued arguments (view, reshape, expand, factory
// ops, ...) rewritten from global to that rank's local sizes. Returns
// {"args": [...], "kwargs": {...}} in the IR's argument encoding.
json::Value local_call_args(const Graph& g, int id, const OpStrategy& s, const std::vector<int64_t>& coord);

}  // namespace tlm
