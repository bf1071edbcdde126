#include "core/plan_check.h"

#include <optional>
#include <string>
#include <vector>

#include "core/placement.h"
#include "core/plan_fingerprint.h"
#include "core/plan_json.h"

namespace tlm {

namespace {

using Shape = std::vector<int64_t>;

// A spec of the document, parsed by the placement table (placement.h) and
// checked against the tensor it places and the plan's mesh.
void check_spec(const json::Value& v, const Shape* shape, size_t mesh_ndim, const std::string& what) {
  if (v.is_null()) {
    if (shape != nullptr) throw InvalidArgument(what + ": no spec for a tensor (expected one placement per mesh dim)");
    return;
  }
  if (shape == nullptr) throw InvalidArgument(what + ": a spec for a value that is not a tensor (expected null)");
  PlacementSpec spec;
  try {
    spec = parse_spec(v.as_string(what));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(what + ": " + e.what());
  }
  validate_spec(spec, static_cast<int64_t>(shape->size()), mesh_ndim, what + " '" + v.as_string() + "'");
}

std::vector<std::optional<Shape>> shapes(const json::Value& v, const std::string& what) {
  std::vector<std::optional<Shape>> out;
  const auto& arr = v.as_array(what);
  for (size_t k = 0; k < arr.size(); ++k) {
    if (arr[k].is_null()) out.emplace_back();
    else out.emplace_back(json::int_list(arr[k], what + "[" + std::to_string(k) + "]"));
  }
  return out;
}

void check_specs(const json::Value& specs, const std::vector<std::optional<Shape>>& tensors, size_t mesh_ndim,
                 const std::string& what, const std::string& tensors_what) {
  const auto& arr = specs.as_array(what);
  if (arr.size() != tensors.size())
    throw InvalidArgument(what + ": " + std::to_string(arr.size()) + " specs for the " + std::to_string(tensors.size()) +
                          " tensors of " + tensors_what + " (expected one each)");
  for (size_t k = 0; k < arr.size(); ++k)
    check_spec(arr[k], tensors[k] ? &*tensors[k] : nullptr, mesh_ndim, what + "[" + std::to_string(k) + "]");
}

}  // namespace

void check_plan_document(const json::Value& doc) {
  doc.as_object("plan");
  const int64_t version = doc.at("format_version", "plan").as_int("plan.format_version");
  if (version == 1)
    throw InvalidArgument("plan.format_version: 1, written by an older torch_localmap before plans recorded the graph, "
                          "mesh and shapes they were made for; this version reads format_version " +
                          std::to_string(kPlanFormatVersion) + ". Plan the model again and save it (Plan.save or "
                          "python -m torch_localmap plan --out)");
  if (version != kPlanFormatVersion)
    throw InvalidArgument("plan.format_version: " + std::to_string(version) + "; this torch_localmap reads format_version " +
                          std::to_string(kPlanFormatVersion));
  const json::Value& mesh = doc.at("mesh", "plan");
  const Shape mesh_shape = json::int_list(mesh.at("shape", "plan.mesh"), "plan.mesh.shape");
  if (mesh_shape.empty()) throw InvalidArgument("plan.mesh.shape: empty (expected one size per mesh dim)");
  for (int64_t s : mesh_shape)
    if (s < 1) throw InvalidArgument("plan.mesh.shape: size " + std::to_string(s) + " (expected positive sizes)");
  if (const auto* dn = mesh.find("dim_names"); dn && !dn->is_null() && dn->size() != 0 && dn->size() != mesh_shape.size())
    throw InvalidArgument("plan.mesh.dim_names: " + std::to_string(dn->size()) + " names for a mesh of " +
                          std::to_string(mesh_shape.size()) + " dims (expected one per dim, or none)");
  const size_t mesh_ndim = mesh_shape.size();

  const auto& nodes = doc.at("nodes", "plan").as_array("plan.nodes");
  if (nodes.empty() || nodes.back().at("op", "plan.nodes[-1]").as_string("plan.nodes[-1].op") != "output")
    throw InvalidArgument("plan.nodes: the last node must be the 'output' node");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json::Value& n = nodes[i];
    const std::string at = "plan.nodes[" + std::to_string(i) + "]";
    const std::string w = at + " ('" + n.at("name", at).as_string(at + ".name") + "', " +
                          n.at("op", at).as_string(at + ".op") + ")";
    const json::Value& t = n.at("tensors", w);
    const auto ins = shapes(t.at("inputs", w + ".tensors"), w + ".tensors.inputs");
    const auto outs = shapes(t.at("outputs", w + ".tensors"), w + ".tensors.outputs");
    if (t.at("dtypes", w + ".tensors").size() != outs.size())
      throw InvalidArgument(w + ".tensors.dtypes: one dtype per output expected");
    for (size_t k = 0; k < t.at("dtypes").size(); ++k)
      parse_dtype(t.at("dtypes").as_array()[k].as_string(w + ".tensors.dtypes[" + std::to_string(k) + "]"));
    const json::Value& st = n.at("strategy", w);
    check_specs(st.at("inputs", w + ".strategy"), ins, mesh_ndim, w + ".strategy.inputs", "its inputs");
    check_specs(st.at("outputs", w + ".strategy"), outs, mesh_ndim, w + ".strategy.outputs", "its outputs");
    if (const auto* rs = n.find("redistributions")) {
      const auto& arr = rs->as_array(w + ".redistributions");
      for (size_t r = 0; r < arr.size(); ++r) {
        const std::string rw = w + ".redistributions[" + std::to_string(r) + "]";
        const int64_t k = arr[r].at("input", rw).as_int(rw + ".input");
        if (k < 0 || k >= static_cast<int64_t>(ins.size()) || !ins[k])
          throw InvalidArgument(rw + ".input: " + std::to_string(k) + " is not a tensor input of the node");
        const int64_t p = arr[r].at("producer", rw).as_int(rw + ".producer");
        if (p < 0 || p >= static_cast<int64_t>(i))
          throw InvalidArgument(rw + ".producer: " + std::to_string(p) + " is not an earlier node");
        check_spec(arr[r].at("from", rw), &*ins[k], mesh_ndim, rw + ".from");
        check_spec(arr[r].at("to", rw), &*ins[k], mesh_ndim, rw + ".to");
      }
    }
  }

  const json::Value& fp = doc.at("fingerprint", "plan");
  const std::string& hash = fp.at("hash", "plan.fingerprint").as_string("plan.fingerprint.hash");
  const std::string& graph = fp.at("graph", "plan.fingerprint").as_string("plan.fingerprint.graph");
  const std::string& boundary = fp.at("boundary", "plan.fingerprint").as_string("plan.fingerprint.boundary");
  const int64_t count = fp.at("nodes", "plan.fingerprint").as_int("plan.fingerprint.nodes");
  if (count != static_cast<int64_t>(nodes.size()))
    throw InvalidArgument("plan.fingerprint.nodes: " + std::to_string(count) + ", but the plan has " +
                          std::to_string(nodes.size()) + " nodes (nodes were added or removed)");
  if (fingerprint_hash(graph, mesh_shape, boundary) != hash) {
    std::string shape = "[";
    for (size_t d = 0; d < mesh_shape.size(); ++d) shape += (d ? ", " : "") + std::to_string(mesh_shape[d]);
    throw InvalidArgument("plan.mesh.shape: " + shape + "] is not the mesh this plan was made for "
                          "(plan.fingerprint.hash covers the mesh shape, fingerprint.graph and fingerprint.boundary, "
                          "and one of them was edited); expected the plan file as torch_localmap wrote it");
  }
}

}  // namespace tlm
