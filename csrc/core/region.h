// Placement arithmetic of a local_map region, one call per region boundary.
//
// A region (torch_localmap.local_map) runs a function on local shards. At its
// input boundary every flattened argument gets a declared placement spec (or
// none, for non-tensor arguments); at its output boundary every flattened
// output does. This file validates those declarations against the actual
// arguments and computes the global <-> local shapes, so Python only moves
// tensors around.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/mesh.h"
#include "core/placement.h"

namespace tlm {

// One flattened argument (or output) of a region call.
struct RegionValue {
  bool is_tensor = false;
  std::string type_name;              // for messages about non-tensor values ("int", "NoneType")
  std::vector<int64_t> shape;         // global shape for inputs, local shape for outputs
  std::optional<std::string> actual;  // inputs only: the DTensor's current spec, nullopt for plain tensors
};

struct RegionInputPlan {
  std::vector<std::optional<PlacementSpec>> specs;  // canonical declared spec per argument
  // Arguments whose actual (DTensor) spec differs from the declared one and
  // must be redistributed before the body runs (redistribute_inputs=true).
  std::vector<int> redistribute;
  // layouts[r][i]: layout of argument i on mesh rank r (row-major coordinates);
  // empty shape/offset for non-tensor arguments. Only rank 0 unless all_ranks.
  std::vector<std::vector<LocalLayout>> layouts;
};

// Validates a region's inputs against their declared specs (one per argument,
// nullopt = None) and plans their local layouts. `what` names the placement
// list in messages ("in_placements"). Throws InvalidArgument when:
// the spec count differs from the argument count; a non-tensor argument has a
// spec; a tensor argument has none; a spec does not fit the tensor (rank,
// mesh dims); or an actual spec differs and redistribute_inputs is false
// (the message names the argument index, expected and actual placements).
RegionInputPlan plan_region_inputs(const Mesh& mesh, const std::vector<RegionValue>& args,
                                   const std::vector<std::optional<std::string>>& specs, bool redistribute_inputs,
                                   bool all_ranks, const std::string& what = "in_placements");

struct RegionOutputPlan {
  std::vector<std::optional<PlacementSpec>> specs;  // canonical declared spec per output
  std::vector<std::vector<int64_t>> global_shapes;  // empty for non-tensor outputs
  // offsets[r][i]: where rank r's local piece of output i starts in the global
  // tensor (only for the ranks whose local shapes were given).
  std::vector<std::vector<std::vector<int64_t>>> offsets;
};

// Global shapes of a region's outputs from their local shapes. `outputs` are
// the outputs seen on rank 0 (local shapes); `other_rank_shapes[r-1][i]` are
// the local shapes of output i on rank r, when the caller has them (simulated
// execution); they must equal what the global shape implies on that rank.
// Local -> global multiplies each sharded dim by its mesh dim sizes, which is
// exact for even shards; uneven shards are caught by the rank checks.
RegionOutputPlan plan_region_outputs(const Mesh& mesh, const std::vector<RegionValue>& outputs,
                                     const std::vector<std::optional<std::string>>& specs,
                                     const std::vector<std::vector<std::vector<int64_t>>>& other_rank_shapes,
                                     const std::string& what = "out_placements");

// Placement of the gradient of a value placed as `spec`: Partial becomes
// Replicate (the cotangent of a partial sum is the same on every rank), as
// DTensor's to_local / from_local backward (torch 2.13 _normalize_placements_for_grad).
PlacementSpec grad_spec(const PlacementSpec& spec);

}  // namespace tlm
