// The planner IR: a traced aten graph as plain data.
//
// Python exports an FX graph to this form in one JSON document (see
// docs/architecture.md, "Planner IR"); C++ reads it once. Arguments stay JSON
// values so every op's schema fits without a per-op Python encoder; tensor
// arguments are references {"t": [node, output]}.
//
// Document layout:
//   {"mesh": {"shape": [2, 2], "dim_names": ["dp", "tp"]},
//    "nodes": [{"name": "mm", "op": "aten.mm.default",
//               "role": "",                // placeholders: param | buffer | input | tangent
//               "args": [{"t": [3, 0]}, {"t": [1, 0]}], "kwargs": {},
//               "outputs": [{"shape": [8, 16], "dtype": "float32"}],
//               "region": {...}            // optional: local_map placements (pinned)
//              }, ...]}
// The last node is the graph's "output" node; its args list the graph outputs.
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "core/mesh.h"
#include "core/tensor_meta.h"

namespace tlm {

struct TensorRef {
  int node = -1;
  int output = 0;
  friend bool operator==(const TensorRef& a, const TensorRef& b) { return a.node == b.node && a.output == b.output; }
};

// Placements fixed by the user for a node (local_map region or a user
// constraint): one spec per tensor input and per tensor output.
struct FixedPlacements {
  std::vector<PlacementSpec> inputs;
  std::vector<PlacementSpec> outputs;
  std::string region;  // region name, for messages
};

struct IrNode {
  std::string name;
  std::string op;    // "placeholder", "output", or an OpOverload name such as "aten.mm.default"
  std::string role;  // placeholders: "param" | "buffer" | "input" | "tangent"; outputs may tag "loss" / "grad"
  json::Value args;    // array
  json::Value kwargs;  // object
  std::vector<TensorMeta> outputs;
  // Tensor arguments in the order they appear in args then kwargs (depth first).
  std::vector<TensorRef> tensor_inputs;
  // Users of this node's outputs, filled by read_graph (node ids, ascending).
  std::vector<int> users;
  bool has_fixed = false;
  FixedPlacements fixed;
  json::Value extra;  // anything else the exporter recorded (kept for the plan)
};

struct Graph {
  Mesh mesh;
  std::vector<IrNode> nodes;

  const TensorMeta& meta(const TensorRef& r) const { return nodes.at(r.node).outputs.at(r.output); }
};

// Parses and validates an IR document. Throws InvalidArgument / json::SchemaError
// naming the node and field on malformed input (unknown dtype, references to
// later nodes, bad mesh, placements that do not fit).
Graph read_graph(const json::Value& doc);
Graph read_graph(const std::string& text);

// A parameter or buffer input of the graph (the module's state).
bool is_state(const IrNode& node);

// What a placeholder stands for: a state's FQN (fixed_params' keys), an input's flat index;
// the node's name where the exporter gave none.
std::string target_of(const IrNode& node);

// Per node: the state placeholder whose value it is as a module reads it -- the state itself,
// or a chain of single-input ops on it (the transpose a Linear takes, a mixed-precision
// cast); -1 for any other node.
std::vector<int> state_read_roots(const Graph& g);

// Collects tensor references in a JSON argument value, depth first.
void collect_tensor_refs(const json::Value& arg, std::vector<TensorRef>& out);
bool is_tensor_ref(const json::Value& arg);

}  // namespace tlm
