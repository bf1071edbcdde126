// What a plan was made for, so a saved plan is applied only to the graph, mesh
// and boundary it was solved for (docs/user_guide.md, "Plan once, train many").
//
// The fingerprint hashes what the planner consumed: every IR node's op, role,
// arguments, output shapes and dtypes, pinned placements and exporter fields
// (not node names, and not device strings: a plan made for a meta-device model
// on a laptop applies to the same model on the cluster's GPUs), the mesh shape
// (not its dim names: a simulated (2, 2) matches a real 2x2 mesh), and the
// boundary options that change what a plan means (mode, outputs, input specs).
// Cost-model choices (device, time and memory limits) are left out: a plan made
// under other costs is still a valid plan; so are fixed_params, constraints of
// the solve that plan_mismatch checks one by one against where the plan put them.
//
// In the plan document (plan_json.h), written by add_plan_provenance:
//   "fingerprint": {"hash": 32 hex digits over graph + mesh shape + boundary,
//                   "graph": 32 hex digits, "boundary": "mode=train;outputs=free;...",
//                   "nodes": node count}
//   per node "role" (placeholders) and "tensors": {"inputs": [shape or null per
//   strategy input], "outputs": [shape per output], "dtypes": [dtype per output]}
#pragma once

#include <string>
#include <vector>

#include "core/graph.h"
#include "core/json.h"
#include "core/planner.h"

namespace tlm {

// 32 lowercase hex digits: the graph's content (no mesh, no options).
std::string graph_hash(const Graph& g);

// The boundary options that change what a plan means, spelled canonically.
std::string boundary_description(const PlanOptions& o);

// The document's fingerprint "hash" from its parts.
std::string fingerprint_hash(const std::string& graph_hex, const std::vector<int64_t>& mesh_shape,
                             const std::string& boundary);

// Adds "fingerprint" and the per-node "role" / "tensors" fields to a plan
// document written by plan_to_json for `g` planned with `o`.
void add_plan_provenance(json::Value& doc, const Graph& g, const PlanOptions& o);

// Empty when the (validated, check_plan_document) plan document was made for
// `g` with `o`; else one sentence naming what differs: the mesh shape, the
// boundary options, a fixed parameter's spec, a tensor input's shape, the node
// count or the first differing node.
std::string plan_mismatch(const Graph& g, const PlanOptions& o, const json::Value& doc);

}  // namespace tlm
