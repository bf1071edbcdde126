#include "core/sharding_constraint.h"

namespace tlm {

void pin_sharding_constraint(IrNode& n, const Graph& g, const std::string& where) {
  if (n.tensor_inputs.size() != 1 || n.outputs.size() != 1)
    throw InvalidArgument(where + ": localmap.sharding_constraint takes one tensor and returns one (got " +
                          std::to_string(n.tensor_inputs.size()) + " in, " + std::to_string(n.outputs.size()) +
                          " out)");
  const json::Value* arg = nullptr;
  if (n.args.is_array() && n.args.as_array().size() > 1) arg = &n.args.as_array()[1];
  else if (n.kwargs.is_object()) arg = n.kwargs.find("placements");
  if (arg == nullptr || !arg->is_string())
    throw InvalidArgument(where + ": localmap.sharding_constraint has no placements string argument");
  const std::string text = arg->as_string(where + ".placements");
  PlacementSpec spec;
  try {
    spec = parse_spec(text);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(where + ": sharding constraint '" + text + "': " + e.what());
  }
  if (spec.size() != g.mesh.ndim())
    throw InvalidArgument(where + ": sharding constraint '" + text + "' has " + std::to_string(spec.size()) +
                          " placements but the mesh " + g.mesh.to_string() + " has " +
                          std::to_string(g.mesh.ndim()) + " dims (expected one placement per mesh dim)");
  validate_spec(spec, n.outputs[0].ndim(), g.mesh.ndim(), where + " sharding constraint");
  n.has_fixed = true;
  n.fixed.inputs = {spec};
  n.fixed.outputs = {spec};
  n.fixed.region = "sharding_constraint";
}

}  // namespace tlm
