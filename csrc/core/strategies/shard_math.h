// Local extents of sharded tensor dims, as the strategy rules need them.
//
// Same semantics as torch.distributed.tensor (torch.chunk-style splits: chunk
// size ceil(n / shards), trailing shards short or empty; several mesh dims
// sharding one tensor dim split it in mesh-dim order). Rules use these to
// decide whether a strategy is exact on uneven shapes (views that merge or
// split a sharded dim, means over a sharded dim, reductions that must not see
// empty shards) and to rewrite shape arguments per rank.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/mesh.h"
#include "core/placement.h"

namespace tlm::strategies {

struct Extent {
  int64_t offset = 0;
  int64_t length = 0;
};

// Shard `index` of `size` split into `parts` torch.chunk-style.
inline Extent chunk_extent(int64_t size, int64_t parts, int64_t index) {
  const int64_t step = parts <= 0 ? size : (size + parts - 1) / parts;
  int64_t off = index * step;
  if (off > size) off = size;
  int64_t len = size - off;
  if (len > step) len = step;
  return {off, len};
}

// Extent of tensor dim `dim` (global size `size`) held at mesh coordinate `coord`.
Extent local_extent(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim,
                    const std::vector<int64_t>& coord);

// Local shape at `coord`.
std::vector<int64_t> local_shape(const std::vector<int64_t>& shape, const Mesh& mesh, const PlacementSpec& spec,
                                 const std::vector<int64_t>& coord);

// Largest local shape any rank holds (chunk 0 at every level is the largest).
std::vector<int64_t> largest_local_shape(const std::vector<int64_t>& shape, const Mesh& mesh,
                                         const PlacementSpec& spec);
int64_t largest_local_numel(const std::vector<int64_t>& shape, const Mesh& mesh, const PlacementSpec& spec);

// Row-major strides of a dense tensor of `shape` (a size-0 dim counts as 1).
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);
// Whether `stride` lays out `size` densely in row-major order (a size-1 dim's stride
// addresses nothing, so any value passes there).
bool dense_strides(const std::vector<int64_t>& size, const std::vector<int64_t>& stride);

// Mesh dims that shard tensor dim `dim`, in mesh-dim order.
std::vector<int> mesh_dims_sharding(const PlacementSpec& spec, int dim);

// Every rank's extent of `dim` (over the coordinates of the mesh dims that
// shard it, in row-major order of those mesh dims).
std::vector<Extent> all_extents(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim);

// True when every rank holds the same number of elements of `dim`.
bool evenly_sharded(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim);
// True when no rank holds an empty piece of `dim`.
bool no_empty_shard(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim);

}  // namespace tlm::strategies
