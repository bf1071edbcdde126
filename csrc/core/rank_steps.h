// What one rank runs of a redistribution plan: each collective step with the
// sizes that rank needs (padding of uneven shards, its piece of the new shard
// dim). The executors -- the localmap::redistribute op's kernel (csrc/torch)
// and the per-step dicts Python reads -- do no shape arithmetic of their own.
#pragma once

#include <cstdint>
#include <vector>

#include "core/redistribute.h"

namespace tlm {

struct RankStep {
  CollectiveStep step;
  int64_t group_size = 1;                // ranks along step.mesh_dim
  std::vector<int64_t> logical_shape;    // the shape the collective sees at this coordinate
  int64_t src_full = 0;                  // ceil(logical[src_dim] / n): padded piece size (src_dim >= 0)
  int64_t dst_full = 0;                  // ceil(logical[dst_dim] / n) (dst_dim >= 0)
  int64_t chunk_start = 0;               // this rank's piece of dst_dim (dst_dim >= 0)
  int64_t chunk_size = 0;
};

// Steps of plan_redistribute(global_shape, mesh, src, dst) as run at `coord`.
// Throws InvalidArgument for refused transitions or a coordinate outside the mesh.
std::vector<RankStep> rank_redistribute_steps(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                              const PlacementSpec& src, const PlacementSpec& dst,
                                              const std::vector<int64_t>& coord);

}  // namespace tlm
