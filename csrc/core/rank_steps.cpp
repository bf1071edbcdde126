#include "core/rank_steps.h"

#include <string>

#include "core/layout.h"

namespace tlm {

std::vector<RankStep> rank_redistribute_steps(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                              const PlacementSpec& src, const PlacementSpec& dst,
                                              const std::vector<int64_t>& coord) {
  check_coord(mesh, coord);
  std::vector<RankStep> out;
  for (const CollectiveStep& s : plan_redistribute(global_shape, mesh, src, dst).steps) {
    RankStep r;
    r.step = s;
    r.group_size = mesh.shape[s.mesh_dim];
    r.logical_shape = logical_shape(s.shape, mesh, s.before, s.mesh_dim, coord);
    const int64_t n = r.group_size;
    if (s.src_dim >= 0) r.src_full = (r.logical_shape[s.src_dim] + n - 1) / n;
    if (s.dst_dim >= 0) {
      r.dst_full = (r.logical_shape[s.dst_dim] + n - 1) / n;
      ChunkExtent c = shard_chunk(r.logical_shape[s.dst_dim], n, coord[s.mesh_dim]);
      r.chunk_start = c.start;
      r.chunk_size = c.size;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace tlm
