#include "core/graph.h"

#include "core/sharding_constraint.h"

namespace tlm {

bool is_tensor_ref(const json::Value& arg) { return arg.is_object() && arg.find("t") != nullptr; }

void collect_tensor_refs(const json::Value& arg, std::vector<TensorRef>& out) {
  if (is_tensor_ref(arg)) {
    auto r = json::int_list(arg.at("t"), "tensor reference");
    if (r.size() != 2) throw json::SchemaError("tensor reference: expected [node, output]");
    out.push_back(TensorRef{static_cast<int>(r[0]), static_cast<int>(r[1])});
    return;
  }
  if (arg.is_array()) {
    for (const auto& a : arg.as_array()) collect_tensor_refs(a, out);
  } else if (arg.is_object()) {
    for (const auto& kv : arg.as_object()) collect_tensor_refs(kv.second, out);
  }
}

static std::vector<PlacementSpec> read_specs(const json::Value& v, const std::string& what) {
  std::vector<PlacementSpec> out;
  const auto& arr = v.as_array(what);
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string w = what + "[" + std::to_string(i) + "]";
    if (arr[i].is_null()) {
      out.emplace_back();  // non-tensor argument: no placement
      continue;
    }
    out.push_back(parse_spec(arr[i].as_string(w)));
  }
  return out;
}

Graph read_graph(const json::Value& doc) {
  Graph g;
  const auto& mesh = doc.at("mesh", "graph");
  std::vector<std::string> names;
  if (const auto* n = mesh.find("dim_names"))
    for (const auto& s : n->as_array("mesh.dim_names")) names.push_back(s.as_string("mesh.dim_names[]"));
  g.mesh = make_mesh(json::int_list(mesh.at("shape", "mesh"), "mesh.shape"), names);

  const auto& nodes = doc.at("nodes", "graph").as_array("graph.nodes");
  g.nodes.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto& jn = nodes[i];
    const std::string what = "nodes[" + std::to_string(i) + "]";
    IrNode n;
    n.name = jn.at("name", what).as_string(what + ".name");
    const std::string where = what + " ('" + n.name + "')";
    n.op = jn.at("op", where).as_string(where + ".op");
    if (const auto* r = jn.find("role")) n.role = r->as_string(where + ".role");
    n.args = jn.find("args") ? jn.at("args") : json::Value(json::Value::Array{});
    n.args.as_array(where + ".args");
    n.kwargs = jn.find("kwargs") ? jn.at("kwargs") : json::Value(json::Value::Object{});
    n.kwargs.as_object(where + ".kwargs");
    if (const auto* outs = jn.find("outputs")) {
      const auto& arr = outs->as_array(where + ".outputs");
      for (size_t k = 0; k < arr.size(); ++k) {
        const std::string w = where + ".outputs[" + std::to_string(k) + "]";
        TensorMeta m;
        m.shape = json::int_list(arr[k].at("shape", w), w + ".shape");
        check_shape(m.shape, w + ".shape");
        m.dtype = parse_dtype(arr[k].at("dtype", w).as_string(w + ".dtype"));
        n.outputs.push_back(std::move(m));
      }
    }
    collect_tensor_refs(n.args, n.tensor_inputs);
    collect_tensor_refs(n.kwargs, n.tensor_inputs);
    for (const auto& r : n.tensor_inputs) {
      if (r.node < 0 || r.node >= static_cast<int>(i))
        throw InvalidArgument(where + ": argument refers to node " + std::to_string(r.node) +
                              " (expected an earlier node, 0.." + std::to_string(static_cast<int>(i) - 1) + ")");
      if (r.output < 0 || r.output >= static_cast<int>(g.nodes[r.node].outputs.size()))
        throw InvalidArgument(where + ": argument refers to output " + std::to_string(r.output) + " of node '" +
                              g.nodes[r.node].name + "', which has " +
                              std::to_string(g.nodes[r.node].outputs.size()) + " tensor outputs");
    }
    if (const auto* fx = jn.find("fixed")) {
      n.has_fixed = true;
      n.fixed.inputs = read_specs(fx->at("inputs", where + ".fixed"), where + ".fixed.inputs");
      n.fixed.outputs = read_specs(fx->at("outputs", where + ".fixed"), where + ".fixed.outputs");
      if (const auto* rn = fx->find("region")) n.fixed.region = rn->as_string(where + ".fixed.region");
      if (n.fixed.inputs.size() != n.tensor_inputs.size())
        throw InvalidArgument(where + ": fixed placements list " + std::to_string(n.fixed.inputs.size()) +
                              " inputs but the node has " + std::to_string(n.tensor_inputs.size()) +
                              " tensor inputs");
      if (n.fixed.outputs.size() != n.outputs.size())
        throw InvalidArgument(where + ": fixed placements list " + std::to_string(n.fixed.outputs.size()) +
                              " outputs but the node has " + std::to_string(n.outputs.size()) + " tensor outputs");
      for (size_t k = 0; k < n.fixed.inputs.size(); ++k)
        validate_spec(n.fixed.inputs[k], g.meta(n.tensor_inputs[k]).ndim(), g.mesh.ndim(),
                      where + " fixed input " + std::to_string(k));
      for (size_t k = 0; k < n.fixed.outputs.size(); ++k)
        validate_spec(n.fixed.outputs[k], n.outputs[k].ndim(), g.mesh.ndim(), where + " fixed output " + std::to_string(k));
    }
    if (n.op == kShardingConstraintOp && !n.has_fixed) pin_sharding_constraint(n, g, where);
    if (const auto* ex = jn.find("extra")) n.extra = *ex;
    g.nodes.push_back(std::move(n));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& r : g.nodes[i].tensor_inputs) {
      auto& u = g.nodes[r.node].users;
      if (u.empty() || u.back() != static_cast<int>(i)) u.push_back(static_cast<int>(i));
    }
  return g;
}

Graph read_graph(const std::string& text) { return read_graph(json::parse(text)); }

bool is_state(const IrNode& node) {
  return node.op == "placeholder" && (node.role == "param" || node.role == "buffer");
}

std::string target_of(const IrNode& node) {
  return node.extra.find("target") ? node.extra.at("target").as_string() : node.name;
}

std::vector<int> state_read_roots(const Graph& g) {
  std::vector<int> root(g.nodes.size(), -1);
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const IrNode& node = g.nodes[v];
    if (is_state(node))
      root[v] = static_cast<int>(v);
    else if (node.op != "placeholder" && node.tensor_inputs.size() == 1)
      root[v] = root[static_cast<size_t>(node.tensor_inputs[0].node)];
  }
  return root;
}

}  // namespace tlm
