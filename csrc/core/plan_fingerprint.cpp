#include "core/plan_fingerprint.h"

#include <cstdint>
#include <cstdio>

#include "core/placement.h"

namespace tlm {

namespace {

// Two FNV-1a streams with different offsets: 128 bits, the same on every
// platform and run (std::hash is neither).
class Hasher {
 public:
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      a_ = (a_ ^ p[i]) * kPrime;
      b_ = (b_ ^ p[i]) * kPrime;
    }
  }
  void tag(char c) { bytes(&c, 1); }
  void integer(int64_t v) {
    unsigned char le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
    bytes(le, 8);
  }
  void text(const std::string& s) {  // length first: "ab"+"c" differs from "a"+"bc"
    integer(static_cast<int64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  std::string hex() const {
    char out[33];
    std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(a_),
                  static_cast<unsigned long long>(b_));
    return out;
  }

 private:
  static constexpr uint64_t kPrime = 0x100000001b3ULL;
  uint64_t a_ = 0xcbf29ce484222325ULL;
  uint64_t b_ = 0x84222325cbf29ce4ULL;
};

// A JSON value, with device strings ({"device": "cuda:0"}) reduced to their tag:
// where the model lives does not change what the plan means.
void hash_value(Hasher& h, const json::Value& v) {
  using T = json::Value::Type;
  h.tag(static_cast<char>('0' + static_cast<int>(v.type())));
  switch (v.type()) {
    case T::Null: return;
    case T::Bool: h.integer(v.as_bool() ? 1 : 0); return;
    case T::Int: h.integer(v.as_int()); return;
    case T::Double: h.text(v.dump()); return;  // the shortest round-trip spelling
    case T::String: h.text(v.as_string()); return;
    case T::Array:
      h.integer(static_cast<int64_t>(v.size()));
      for (const auto& x : v.as_array()) hash_value(h, x);
      return;
    case T::Object: {
      const auto& obj = v.as_object();
      if (obj.size() == 1 && obj[0].first == "device") {
        h.text("device");
        return;
      }
      h.integer(static_cast<int64_t>(obj.size()));
      for (const auto& kv : obj) {
        h.text(kv.first);
        hash_value(h, kv.second);
      }
      return;
    }
  }
}

void hash_specs(Hasher& h, const std::vector<PlacementSpec>& specs) {
  h.integer(static_cast<int64_t>(specs.size()));
  for (const auto& s : specs) h.text(to_string(s));
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string meta_text(const TensorMeta& m) { return shape_text(m.shape) + " " + to_string(m.dtype); }

std::string node_label(size_t i, const std::string& name, const std::string& op) {
  return "node " + std::to_string(i) + " ('" + name + "', " + op + ")";
}

// Tensor inputs of a node as its strategy lists them: the output node lists
// every graph output, non-tensors (null) included.
std::vector<const TensorMeta*> strategy_input_metas(const Graph& g, size_t i) {
  std::vector<const TensorMeta*> out;
  const IrNode& n = g.nodes[i];
  if (n.op == "output") {
    const json::Value& outs = n.args.as_array().at(0);
    for (const auto& v : outs.as_array()) {
      if (!is_tensor_ref(v)) {
        out.push_back(nullptr);
        continue;
      }
      std::vector<TensorRef> refs;
      collect_tensor_refs(v, refs);
      out.push_back(&g.meta(refs.at(0)));
    }
    return out;
  }
  for (const TensorRef& r : n.tensor_inputs) out.push_back(&g.meta(r));
  return out;
}

json::Value shape_json(const std::vector<int64_t>& shape) { return json::Value(shape); }

}  // namespace

std::string graph_hash(const Graph& g) {
  Hasher h;
  h.integer(static_cast<int64_t>(g.nodes.size()));
  for (const IrNode& n : g.nodes) {
    h.text(n.op);
    h.text(n.role);
    hash_value(h, n.args);
    hash_value(h, n.kwargs);
    h.integer(static_cast<int64_t>(n.outputs.size()));
    for (const TensorMeta& m : n.outputs) {
      h.integer(static_cast<int64_t>(m.dtype));
      h.integer(m.ndim());
      for (int64_t s : m.shape) h.integer(s);
    }
    h.tag(n.has_fixed ? 'F' : '-');
    if (n.has_fixed) {
      hash_specs(h, n.fixed.inputs);
      hash_specs(h, n.fixed.outputs);
    }
    hash_value(h, n.extra);
  }
  return h.hex();
}

std::string boundary_description(const PlanOptions& o) {
  std::string s = "mode=" + o.mode + ";outputs=" + o.outputs + ";replicated_outputs=[";
  bool first = true;
  for (const auto& t : o.replicated_outputs) s += (first ? "" : ",") + t, first = false;
  s += "];input_specs={";
  first = true;
  for (const auto& kv : o.input_specs) s += (first ? "" : ",") + kv.first + ":" + to_string(kv.second), first = false;
  s += "}";
  if (!o.like.empty()) s += ";like=" + o.like;  // absent when unset: older plan files keep their hash
  return s;
}

std::string fingerprint_hash(const std::string& graph_hex, const std::vector<int64_t>& mesh_shape,
                             const std::string& boundary) {
  Hasher h;
  h.text(graph_hex);
  h.integer(static_cast<int64_t>(mesh_shape.size()));
  for (int64_t s : mesh_shape) h.integer(s);
  h.text(boundary);
  return h.hex();
}

void add_plan_provenance(json::Value& doc, const Graph& g, const PlanOptions& o) {
  auto& nodes = doc.at("nodes", "plan").as_array("plan.nodes");
  if (nodes.size() != g.nodes.size())
    throw InvalidArgument("plan has " + std::to_string(nodes.size()) + " nodes but the graph has " +
                          std::to_string(g.nodes.size()));
  auto& mutable_nodes = doc.mutable_object();
  for (auto& kv : mutable_nodes) {
    if (kv.first != "nodes") continue;
    auto& arr = kv.second.mutable_array();
    for (size_t i = 0; i < arr.size(); ++i) {
      const IrNode& n = g.nodes[i];
      if (!n.role.empty() && n.op == "placeholder") arr[i].set("role", n.role);
      json::Value::Array inputs, outputs, dtypes;
      for (const TensorMeta* m : strategy_input_metas(g, i))
        inputs.push_back(m == nullptr ? json::Value(nullptr) : shape_json(m->shape));
      for (const TensorMeta& m : n.outputs) {
        outputs.push_back(shape_json(m.shape));
        dtypes.emplace_back(to_string(m.dtype));
      }
      json::Value t;
      t.set("inputs", json::Value(std::move(inputs)));
      t.set("outputs", json::Value(std::move(outputs)));
      t.set("dtypes", json::Value(std::move(dtypes)));
      arr[i].set("tensors", std::move(t));
    }
  }
  const std::string graph = graph_hash(g), boundary = boundary_description(o);
  json::Value fp;
  fp.set("hash", fingerprint_hash(graph, g.mesh.shape, boundary));
  fp.set("graph", graph);
  fp.set("boundary", boundary);
  fp.set("nodes", static_cast<int64_t>(g.nodes.size()));
  doc.set("fingerprint", std::move(fp));
}

std::string plan_mismatch(const Graph& g, const PlanOptions& o, const json::Value& doc) {
  const std::vector<int64_t> mesh = json::int_list(doc.at("mesh", "plan").at("shape", "plan.mesh"), "plan.mesh.shape");
  if (mesh != g.mesh.shape)
    return "mesh shape: the plan was made for a mesh of shape " + shape_text(mesh) + ", this mesh has shape " +
           shape_text(g.mesh.shape);
  const json::Value& fp = doc.at("fingerprint", "plan");
  const std::string boundary = boundary_description(o);
  const std::string& planned_boundary = fp.at("boundary", "plan.fingerprint").as_string("plan.fingerprint.boundary");
  if (boundary != planned_boundary)
    return "boundary options: the plan was made with " + planned_boundary + ", this call asks for " + boundary;
  const auto& nodes = doc.at("nodes", "plan").as_array("plan.nodes");
  // Parameters this call fixes must be where the plan put them (a constraint the plan was
  // solved under, or one it happens to satisfy; not part of the fingerprint).
  for (const auto& kv : o.fixed_params) {
    for (size_t i = 0; i < g.nodes.size() && i < nodes.size(); ++i) {
      const IrNode& n = g.nodes[i];
      const json::Value* target = n.extra.is_object() ? n.extra.find("target") : nullptr;
      if (n.op != "placeholder" || (n.role != "param" && n.role != "buffer") || !target || !target->is_string() ||
          target->as_string() != kv.first || n.outputs.empty())
        continue;
      PlacementSpec want = kv.second, got = parse_spec(
          nodes[i].at("strategy", "plan.nodes[]").at("outputs").as_array().at(0).as_string("plan.nodes[].strategy"));
      validate_spec(want, n.outputs[0].ndim(), g.mesh.ndim(), "fixed_params." + kv.first);
      validate_spec(got, n.outputs[0].ndim(), g.mesh.ndim(), "plan.nodes[" + std::to_string(i) + "]");
      if (want != got)
        return "fixed_params['" + kv.first + "']: the plan places it in " + to_string(got) + ", this call fixes it to " +
               to_string(want);
    }
  }
  // Tensor inputs, in order (the shapes and dtypes of the example inputs).
  std::vector<size_t> planned_inputs, inputs;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (const auto* r = nodes[i].find("role"); r && r->is_string() && r->as_string() == "input") planned_inputs.push_back(i);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op == "placeholder" && g.nodes[i].role == "input") inputs.push_back(i);
  auto planned_meta = [&](size_t i, size_t k) {
    const json::Value& t = nodes[i].at("tensors", "plan.nodes[]");
    return shape_text(json::int_list(t.at("outputs").as_array().at(k), "plan.nodes[].tensors.outputs")) + " " +
           t.at("dtypes").as_array().at(k).as_string();
  };
  if (planned_inputs.size() != inputs.size())
    return "inputs: the plan was made for " + std::to_string(planned_inputs.size()) + " tensor inputs, this call has " +
           std::to_string(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const std::string want = planned_meta(planned_inputs[k], 0), got = meta_text(g.nodes[inputs[k]].outputs.at(0));
    if (want != got)
      return "input " + std::to_string(k) + " ('" + g.nodes[inputs[k]].name + "'): the plan was made for " + want +
             ", this call has " + got;
  }
  // The graph: the first node whose op or output metadata differs.
  const size_t common = std::min(nodes.size(), g.nodes.size());
  for (size_t i = 0; i < common; ++i) {
    const std::string& op = nodes[i].at("op", "plan.nodes[]").as_string();
    const std::string& name = nodes[i].at("name", "plan.nodes[]").as_string();
    const IrNode& n = g.nodes[i];
    std::string why;
    if (op != n.op) {
      why = "op";
    } else {
      const json::Value& t = nodes[i].at("tensors", "plan.nodes[]");
      if (t.at("outputs").size() != n.outputs.size()) why = "output count";
      for (size_t k = 0; why.empty() && k < n.outputs.size(); ++k)
        if (planned_meta(i, k) != meta_text(n.outputs[k]))
          why = "output " + std::to_string(k) + " (" + planned_meta(i, k) + " vs " + meta_text(n.outputs[k]) + ")";
    }
    if (!why.empty())
      return "graph: the plan has " + std::to_string(nodes.size()) + " nodes, this graph " +
             std::to_string(g.nodes.size()) + "; the first differing node is " + node_label(i, name, op) +
             " in the plan and " + node_label(i, n.name, n.op) + " in this graph (" + why + " differs)";
  }
  if (nodes.size() != g.nodes.size())
    return "graph: the plan has " + std::to_string(nodes.size()) + " nodes, this graph " +
           std::to_string(g.nodes.size()) + " (the first " + std::to_string(common) + " agree)";
  const std::string& planned_graph = fp.at("graph", "plan.fingerprint").as_string("plan.fingerprint.graph");
  if (graph_hash(g) != planned_graph)
    return "graph: the same ops and shapes, but some op's arguments or attributes differ (fingerprint " +
           planned_graph + " in the plan, " + graph_hash(g) + " for this graph)";
  return "";
}

}  // namespace tlm
