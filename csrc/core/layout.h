// Local shard shapes and global offsets, exactly as torch.distributed.tensor
// computes them (torch.chunk-style splits, uneven last shards, empty shards,
// several mesh dims sharding one tensor dim in mesh-dim order).
#pragma once

#include <cstdint>
#include <vector>

#include "core/mesh.h"
#include "core/placement.h"

namespace tlm {

struct LocalLayout {
  std::vector<int64_t> shape;
  std::vector<int64_t> offset;
};

// Throws InvalidArgument unless `coord` has one entry per mesh dim, each inside the mesh.
void check_coord(const Mesh& mesh, const std::vector<int64_t>& coord);

// Layout of the shard held at mesh coordinate `coord`. Throws InvalidArgument
// when the spec does not fit (see validate_spec) or coord is outside the mesh.
LocalLayout local_layout(const std::vector<int64_t>& global_shape, const Mesh& mesh, const PlacementSpec& spec,
                         const std::vector<int64_t>& coord);

// The largest local shape any rank holds (what costs and memory are charged on).
std::vector<int64_t> max_local_shape(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                     const PlacementSpec& spec);

// Layouts of every rank, indexed by rank (row-major mesh coordinates). One call
// for the whole mesh so Python never loops over coordinates.
std::vector<LocalLayout> all_local_layouts(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                           const PlacementSpec& spec);

// The shape a collective on `mesh_dim` sees at `coord`: the global shape cut by
// the Shard placements of mesh dims before `mesh_dim` only (DTensor's "logical
// shape", which decides the padding of uneven all-gathers and all-to-alls).
std::vector<int64_t> logical_shape(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                   const PlacementSpec& spec, int mesh_dim, const std::vector<int64_t>& coord);

// One torch.chunk-style split of a dim of `size` into `num_chunks`, as DTensor's
// Shard.local_shard_size_and_offset: the piece at `index` (possibly empty).
struct ChunkExtent {
  int64_t size;
  int64_t start;  // relative to the split dim; clamped to `size` for empty pieces
};
ChunkExtent shard_chunk(int64_t size, int64_t num_chunks, int64_t index);

}  // namespace tlm
