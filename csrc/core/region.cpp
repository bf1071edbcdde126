#include "core/region.h"

#include "core/placement_kinds.h"

namespace tlm {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Declared spec of value i, checked against its kind and rank; nullopt for
// non-tensor values. `role` is "argument" or "output".
std::optional<PlacementSpec> checked_spec(const Mesh& mesh, const RegionValue& v,
                                          const std::optional<std::string>& spec, size_t i, const std::string& what,
                                          const std::string& role) {
  const std::string where = what + "[" + std::to_string(i) + "]";
  if (!v.is_tensor) {
    if (spec)
      throw InvalidArgument(where + ": " + role + " " + std::to_string(i) + " is not a tensor (" + v.type_name +
                            ") but has placements " + *spec + "; use None for non-tensor " + role + "s");
    return std::nullopt;
  }
  if (!spec)
    throw InvalidArgument(where + ": " + role + " " + std::to_string(i) + " is a tensor of shape " +
                          shape_str(v.shape) + " but its placements are None; give one placement per mesh dim");
  PlacementSpec s = parse_spec(*spec);
  validate_spec(s, static_cast<int64_t>(v.shape.size()), mesh.ndim(), where + " (" + role + " " + std::to_string(i) +
                                                                          ", shape " + shape_str(v.shape) + ")");
  return s;
}

void check_count(size_t specs, size_t values, const std::string& what, const std::string& role) {
  if (specs != values)
    throw InvalidArgument(what + " has " + std::to_string(specs) + " entries but the region has " +
                          std::to_string(values) + " " + role + "s (after flattening); give one placement "
                          "spec (or None for a non-tensor) per " + role);
}

}  // namespace

RegionInputPlan plan_region_inputs(const Mesh& mesh, const std::vector<RegionValue>& args,
                                   const std::vector<std::optional<std::string>>& specs, bool redistribute_inputs,
                                   bool all_ranks, const std::string& what) {
  check_count(specs.size(), args.size(), what, "argument");
  RegionInputPlan plan;
  plan.specs.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const RegionValue& a = args[i];
    plan.specs.push_back(checked_spec(mesh, a, specs[i], i, what, "argument"));
    if (!a.is_tensor || !a.actual) continue;
    PlacementSpec actual = parse_spec(*a.actual);
    validate_spec(actual, static_cast<int64_t>(a.shape.size()), mesh.ndim(),
                  "argument " + std::to_string(i) + " current placements");
    if (actual == *plan.specs.back()) continue;
    if (!redistribute_inputs)
      throw InvalidArgument("argument " + std::to_string(i) + " has placements " + to_string(actual) + " but " +
                            what + "[" + std::to_string(i) + "] expects " + to_string(*plan.specs.back()) +
                            "; pass redistribute_inputs=True to redistribute it, or redistribute it before the call");
    plan.redistribute.push_back(static_cast<int>(i));
  }
  const int64_t ranks = all_ranks ? mesh.size() : 1;
  plan.layouts.resize(static_cast<size_t>(ranks));
  for (int64_t r = 0; r < ranks; ++r) {
    const std::vector<int64_t> coord = mesh.coordinate(r);
    auto& row = plan.layouts[static_cast<size_t>(r)];
    row.reserve(args.size());
    for (size_t i = 0; i < args.size(); ++i)
      row.push_back(plan.specs[i] ? local_layout(args[i].shape, mesh, *plan.specs[i], coord) : LocalLayout{});
  }
  return plan;
}

RegionOutputPlan plan_region_outputs(const Mesh& mesh, const std::vector<RegionValue>& outputs,
                                     const std::vector<std::optional<std::string>>& specs,
                                     const std::vector<std::vector<std::vector<int64_t>>>& other_rank_shapes,
                                     const std::string& what) {
  check_count(specs.size(), outputs.size(), what, "output");
  RegionOutputPlan plan;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const RegionValue& o = outputs[i];
    plan.specs.push_back(checked_spec(mesh, o, specs[i], i, what, "output"));
    std::vector<int64_t> global = o.shape;
    if (plan.specs.back()) {
      const PlacementSpec& s = *plan.specs.back();
      for (size_t md = 0; md < s.size(); ++md)
        if (kind_info(s[md].kind).splits_dim) global[static_cast<size_t>(s[md].dim)] *= mesh.shape[md];
    }
    plan.global_shapes.push_back(plan.specs.back() ? global : std::vector<int64_t>{});
  }
  if (other_rank_shapes.size() + 1 > static_cast<size_t>(mesh.size()))
    throw InvalidArgument(what + ": local output shapes given for " + std::to_string(other_rank_shapes.size() + 1) +
                          " ranks but the mesh " + mesh.to_string() + " has " + std::to_string(mesh.size()));
  plan.offsets.resize(other_rank_shapes.size() + 1);
  for (size_t r = 0; r < plan.offsets.size(); ++r) {
    const std::vector<int64_t> coord = mesh.coordinate(static_cast<int64_t>(r));
    if (r > 0 && other_rank_shapes[r - 1].size() != outputs.size())
      throw InvalidArgument(what + ": rank " + std::to_string(r) + " returned " +
                            std::to_string(other_rank_shapes[r - 1].size()) + " outputs but rank 0 returned " +
                            std::to_string(outputs.size()));
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!plan.specs[i]) {
        plan.offsets[r].emplace_back();
        continue;
      }
      LocalLayout l = local_layout(plan.global_shapes[i], mesh, *plan.specs[i], coord);
      const std::vector<int64_t>& got = r == 0 ? outputs[i].shape : other_rank_shapes[r - 1][i];
      if (l.shape != got)
        throw InvalidArgument(what + "[" + std::to_string(i) + "]: output " + std::to_string(i) + " on rank " +
                              std::to_string(r) + " (mesh coordinate " + shape_str(coord) + ") has local shape " +
                              shape_str(got) + " but placements " + to_string(*plan.specs[i]) +
                              " of a global tensor of shape " + shape_str(plan.global_shapes[i]) + " imply " +
                              shape_str(l.shape) + " (uneven or inconsistent local outputs)");
      plan.offsets[r].push_back(std::move(l.offset));
    }
  }
  return plan;
}

PlacementSpec grad_spec(const PlacementSpec& spec) {
  PlacementSpec out = spec;
  for (auto& p : out) {
    const Placement::Kind g = kind_info(p.kind).gradient;
    if (g != p.kind) p = Placement{g, 0, ReduceOp::Sum};
  }
  return out;
}

}  // namespace tlm
