// The planner: IR graph -> strategies -> costs -> solver problem -> plan.
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

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost_model.h"
#include "graph.h"
#include "json.h"
#include "solver/problem.h"
#include "strategy.h"

namespace tlm {

struct PlanOptions {
  std::string mode = "train";  // "train" | "compile"
  std::string device = "H100";
  std::string calibration_json;
  bool fallback_replicate = true;
  double time_limit_s = 10.0;
  uint64_t seed = 0;
  int threads = 2;
  std::optional<int64_t> memory_limit_bytes;  // per rank, over the whole step
  // Parameters whose spec is fixed by the caller (hand plans such as DDP or
  // FSDP, or user constraints), by parameter name.
  std::map<std::string, PlacementSpec> fixed_params;
  // Stop after strategies and every cost are computed; return counts and timings
  // instead of a plan (benchmarks). Dense edge matrices are not materialized.
  bool build_only = false;
};

PlanOptions read_plan_options(const json::Value& v);

// Version of the plan document below; readers refuse other versions (plan files
// outlive the code that wrote them).
constexpr int kPlanFormatVersion = 1;

// The plan: a JSON value (see docs/architecture.md, "Plan") with, per node, the
// chosen strategy and its costs, per graph output its spec, and a summary
// (estimated step time split into compute and communication, peak memory,
// solver cost/bound/gap, ops that fell back to replicate, strategy counts).
json::Value plan_graph(const Graph& g, const PlanOptions& options);

// Per-node call arguments for the rank at `coord` under a plan (one call per rank).
json::Value rank_call_args(const Graph& g, const json::Value& plan, const std::vector<int64_t>& coord);

// Total work of every op in a graph under its first (on a 1-device mesh: the
// only) strategy: how the work inside a local_map region body is measured.
OpWork graph_work(const Graph& g);

// Picoseconds, the solver's integer cost unit (exact sums; 1 ps resolution
// is far below any op's time, and int64 holds 106 days of it).
solver::Cost to_cost(double seconds);

}  // namespace tlm
