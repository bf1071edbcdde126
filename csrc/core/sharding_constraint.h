// localmap::sharding_constraint nodes in the planner IR: the op (registered by
// csrc/torch) carries its placements as a string argument; the planner pins
// the node to them, input and output alike, forward and backward (the op's
// backward is the same op with the gradient placements).
#pragma once

#include <string>

#include "core/graph.h"

namespace tlm {

inline constexpr const char* kShardingConstraintOp = "localmap.sharding_constraint.default";

// Fills n.fixed from the node's `placements` argument (schema position 1).
// Throws InvalidArgument when the argument is missing, does not parse, or does
// not fit the tensor or the mesh (one placement per mesh dim).
void pin_sharding_constraint(IrNode& n, const Graph& g, const std::string& where);

}  // namespace tlm
