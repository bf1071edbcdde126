// The planner's JSON edge: plan options in, the plan document out (and back in,
// for per-rank call arguments). Only the bindings and the plan file use it; the
// stages exchange typed values (planner.h).
//
// Plan document (format_version kPlanFormatVersion):
//   {"format_version": 2, "mesh": {"shape", "dim_names"},
//    "fingerprint": {"hash", "graph", "boundary", "nodes"} (plan_fingerprint.h: what the plan was made for),
//    "nodes": [{"name", "op", "strategy": {"inputs": [spec...], "outputs": [spec...]},
//               "compute_s", "comm_s", "family", "num_strategies", "bytes", "fell_back"?,
//               "redistributions"?: [{"input", "producer", "from", "to", "seconds", "collectives"}],
//               "role"? (placeholders), "tensors": {"inputs", "outputs", "dtypes"}}, ...,
//              {"name", "op": "output", "strategy": {"inputs": [spec or null per graph output],
//               "outputs": []}, "compute_s": 0, "comm_s"}],
//    "summary": {"estimated_step_s", "compute_s", "comm_s", "peak_bytes",
//                "memory": {"parameters", "gradients", "optimizer_state", "activations", "peak"},
//                "solver": {"cost" (decimal string), "bound", "gap", "seconds", "status", "note"?},
//                "fallback_ops", "strategy_counts": {family: {"nodes", "strategies"}},
//                "device", "mode", "memory_timeline": {"node", "bytes"},
//                "solver_progress": {"seconds", "cost", "bound"}}}
// "fingerprint", "role" and "tensors" come from add_plan_provenance (plan_fingerprint.h);
// check_plan_document (plan_check.h) validates a document read from a file.
// Version 2 added them; version 1 documents are refused with what to do.
// (Python adds per-node "region", "module", "phase", "seq_nr", "role", "target", and
// "options" and "module_calls" at the top, for reports; C++ readers ignore them.)
#pragma once

#include "core/explain.h"
#include "core/json.h"
#include "core/plan.h"
#include "core/planner.h"

namespace tlm {

// Version of the plan document; readers refuse other versions (plan files
// outlive the code that wrote them).
constexpr int kPlanFormatVersion = 2;

PlanOptions read_plan_options(const json::Value& v);

json::Value plan_to_json(const Plan& plan);
// The parts of a plan document later stages read back (mesh, per-node strategies).
// Throws json::SchemaError / InvalidArgument naming the field.
Plan plan_from_json(const json::Value& doc);

// {"node", "name", "op", "alternatives": [{"inputs", "outputs", "compute_s", "comm_in_s",
//   "comm_out_s", "bytes", "chosen", "possible", "why_not"?}, ...]} (explain.h).
json::Value explanation_to_json(const Explanation& ex);

}  // namespace tlm
