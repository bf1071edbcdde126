// The planner: a short driver over typed stages.
//
//   Graph (graph.h, read from the IR document)
//     -> strategies      enumerate_graph_strategies   strategy.h     std::vector<NodeStrategies>
//     -> cost tables     build_cost_tables            cost_tables.h  CostTables (solver::Problem inside)
//     -> solve           solver::solve                solver/solver.h  solver::SolveResult
//     -> plan            make_plan                    plan.h         Plan
//   JSON only at the edges: plan_json.h (options in, plan document out).
//
// Boundary policy. In "train" mode (parallelize) parameters may take any R/S
// spec, each parameter gradient must come out in its parameter's spec, user
// inputs and tangents arrive replicated (every rank holds the full batch; a
// consumer that wants a shard takes its chunk locally, at no communication
// cost) and forward outputs leave replicated. In "compile" mode
// (torch.compile backend) every placeholder arrives replicated and every
// output leaves replicated, so the compiled program keeps the module's
// semantics exactly.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/cost_tables.h"
#include "core/explain.h"
#include "core/graph.h"
#include "core/plan.h"
#include "core/replication_reason.h"
#include "core/strategy.h"

namespace tlm {

struct PlanOptions {
  std::string mode = "train";  // "train" | "compile"
  std::string device = "H100";
  std::string calibration_json;
  bool fallback_replicate = true;
  double time_limit_s = 10.0;
  // Seconds this plan already took before plan_graph (reading the IR): they
  // count against time_limit_s, which bounds the whole plan call.
  double elapsed_before_s = 0;
  // The caller's own share of the call, outside this library: exporting the graph
  // before and reading the plan back after (Python glue: about a second on a 70B
  // graph). It counts against time_limit_s too.
  double host_seconds = 0;
  uint64_t seed = 0;
  int threads = 2;
  // Per-rank memory limit over the whole step. Unset (the default): the
  // cost-model device's capacity minus kDeviceMemoryHeadroom; memory_unlimited
  // plans without one.
  std::optional<int64_t> memory_limit_bytes;
  bool memory_unlimited = false;
  // Parameters whose spec is fixed by the caller (hand plans such as DDP or
  // FSDP, or user constraints), by parameter name.
  std::map<std::string, PlacementSpec> fixed_params;
  // User inputs that arrive sharded (data loaders, DTensor inputs), by flat input index.
  std::map<std::string, PlacementSpec> input_specs;
  // Plan as one of torch's wrappers or parallel styles would run the step, so our
  // runtime can be measured on torch's own plan (cost_tables.h, BoundaryPolicy::like):
  // "" (free), "ddp", "fsdp2" or "tp".
  std::string like;
  // The solver may recompute values backward reads instead of keeping them
  // (recompute.h), when a plan keeping them all would not fit or cost more.
  bool recompute = false;
  // A fixed recompute policy (BoundaryPolicy::recompute_only): these IR nodes are
  // recomputed where they may be, every other value is kept; implies `recompute`.
  std::optional<std::set<std::string>> recompute_only;
  // "free": forward outputs leave in any R/S spec (parallelize returns DTensors);
  // "replicated": whole on every rank (the compile backend hands plain tensors
  // back to the Python code around the graph).
  std::string outputs = "free";
  // With "free": these forward outputs (by output target) still leave replicated.
  std::set<std::string> replicated_outputs;
  // Tensors of a parameter's size the optimizer keeps per parameter (AdamW: 2, SGD
  // with momentum: 1): the plan's memory estimate counts them.
  int optimizer_states = 2;
  // The runtime's gradient bucket cap in bytes (BoundaryPolicy::bucket_bytes; 0: none).
  int64_t bucket_bytes = 25 << 20;
  // Many repeated blocks (fold_blocks.h): solve first with every block tied, and start the
  // full solve from that plan.
  bool fold_repeated = true;
  // The solve stops once its certified gap is at most this (solver.h).
  double gap_tolerance = 1e-3;
  // The runtime holds state the plan replicates whole as plain tensors (parallelize's
  // replicated_state="plain", plain_state.h), sparing the optimizer DTensor's dispatch:
  // such a plan is priced so, and a train plan that shards state is weighed against the
  // best plan that replicates it all.
  bool plain_replicated_state = false;
  // Called as the solve improves (seconds, best cost in seconds, bound in seconds),
  // from the solver's threads; the plan records the same points (solver_progress).
  std::function<void(double, double, double)> on_progress;
};

// Share of the device's memory a default limit leaves unplanned: the CUDA
// context, NCCL's buffers, the caching allocator's fragmentation and the
// transient buffers of redistributions, which the plan does not model.
constexpr double kDeviceMemoryHeadroom = 0.10;

// The limit a plan is made under: {bytes (0: none), where it comes from}.
struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;
};
MemoryLimit memory_limit_of(const PlanOptions& options, const CostModel& cm);

// Strategies, cost tables and the solve: the plan. The time limit covers the
// whole call: the solver gets what building the tables left of it. With `working`, the
// tables and strategies are handed over there instead of freed (the plan references none
// of them): the caller frees them when it suits it (background_release.h).
Plan plan_graph(const Graph& g, const PlanOptions& options, std::shared_ptr<void>* working = nullptr);

// A plan made for one call of a program carried to a call that differs only in
// sizes (a new sequence length, a smaller last batch): the previous plan's
// strategy at every node, priced at the new sizes, with no full solve. Kept when
// every strategy is still offered at the new sizes (a dim that no longer divides
// drops some), the memory limit holds, and a short search at the new sizes finds
// no plan cheaper by more than `tolerance` (relative); otherwise `reason` says why
// not and the caller plans afresh.
struct PlanTransfer {
  std::optional<Plan> plan;    // the previous choice at the new sizes, when kept
  std::string reason;          // why it was not kept ("" when kept)
  double previous_cost_s = 0;  // the previous choice priced at the new sizes (0: not applicable)
  double best_cost_s = 0;      // the cheapest plan the short search found at the new sizes
  double bound_s = 0;          // its certified lower bound on any plan at the new sizes
};
PlanTransfer transfer_plan(const Graph& g, const PlanOptions& options, const Plan& previous, double tolerance);

// The solver problem the planner would solve (stages 1-2), for benchmarks
// and for solving it elsewhere (`python -m torch_localmap solve`).
solver::Problem planner_problem(const Graph& g, const PlanOptions& options);

// Stages 1-2 only, for benchmarks: counts and no dense edge matrices (3-D/4-D
// meshes would need gigabytes).
struct BuildStats {
  int64_t nodes = 0, strategies = 0, edges = 0, edge_matrix_entries = 0, distinct_redistribution_costs = 0;
};
BuildStats build_only(const Graph& g, const PlanOptions& options);

// Why node `node` got its strategy in `plan` (a plan of `g` made with `options`): its
// strategies priced under the same cost model, strategy and boundary options (explain.h).
Explanation explain_planned_node(const Graph& g, const PlanOptions& options, const Plan& plan, int node);

// Why `plan` (of `g`, made with `options`) replicates everything, if it does (replication_reason.h).
ReplicationReason replication_reason_of_plan(const Graph& g, const PlanOptions& options, const Plan& plan);

// Per-node call arguments for the rank at `coord` under a plan (one call per
// rank), in the IR's argument encoding: {"args": [...], "kwargs": {...}} per
// node, null for placeholders and the output node.
json::Value rank_call_args(const Graph& g, const Plan& plan, const std::vector<int64_t>& coord);

// Total work of every op in a graph under its first (on a 1-device mesh: the
// only) strategy: how the work inside a local_map region body is measured.
OpWork graph_work(const Graph& g);

}  // namespace tlm
