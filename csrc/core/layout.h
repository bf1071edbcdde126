// Local shard shapes and global offsets, exactly as torch.distributed.tensor
// computes them (torch.chunk-style splits, uneven last shards, empty shards,
// several mesh dims sharding one tensor dim in mesh-dim order).
#pragma once

#include <cstdint>
#include <vector>

#include "mesh.h"
#include "placement.h"

namespace tlm {

struct LocalLayout {
  std::vector<int64_t> shape;
  std::vector<int64_t> offset;
};

// Layout of the shard held at mesh coordinate `coord`. Throws InvalidArgument
// when the spec does not fit (see validate_spec) or coord is outside the mesh.
LocalLayout local_layout(const std::vector<int64_t>& global_shape, const Mesh& mesh, const PlacementSpec& spec,
                         const std::vector<int64_t>& coord);

// The largest local shape any rank holds (what costs and memory are charged on).
std::vector<int64_t> max_local_shape(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                     const PlacementSpec& spec);

}  // namespace tlm
