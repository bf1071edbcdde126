// Local shard shapes and offsets, following torch 2.13's
// torch.distributed.tensor._utils._compute_local_shape_and_global_offset:
// mesh dims shard their tensor dim left to right, each split torch.chunk-style
// (ceil-sized pieces, trailing pieces short or empty). An empty shard reports
// the global size of that dim as its offset, as torch does.
#include "core/layout.h"

#include <algorithm>
#include <string>

#include "core/placement_kinds.h"

namespace tlm {
namespace {

void check_shape(const std::vector<int64_t>& global_shape) {
  for (size_t d = 0; d < global_shape.size(); ++d)
    if (global_shape[d] < 0)
      throw InvalidArgument("global shape: dim " + std::to_string(d) + " has negative size " +
                            std::to_string(global_shape[d]) + " (expected sizes >= 0)");
}

PlacementSpec checked_spec(const std::vector<int64_t>& global_shape, const Mesh& mesh, const PlacementSpec& spec) {
  check_shape(global_shape);
  PlacementSpec s = spec;
  validate_spec(s, static_cast<int64_t>(global_shape.size()), mesh.ndim(), "placements " + to_string(spec));
  return s;
}

// Applies the Shard placements of mesh dims [0, end_mesh_dim) at `coord`.
// `spec` is already validated.
LocalLayout apply_shards(const std::vector<int64_t>& global_shape, const Mesh& mesh, const PlacementSpec& spec,
                         size_t end_mesh_dim, const std::vector<int64_t>& coord) {
  LocalLayout out{global_shape, std::vector<int64_t>(global_shape.size(), 0)};
  for (size_t md = 0; md < end_mesh_dim; ++md) {
    if (!kind_info(spec[md].kind).splits_dim) continue;
    const int d = spec[md].dim;
    ChunkExtent c = shard_chunk(out.shape[d], mesh.shape[md], coord[md]);
    out.shape[d] = c.size;
    // torch tracks the global index list of the shard; its first element is
    // the previous start plus the new relative start, or the global dim size
    // once the shard is empty.
    out.offset[d] = c.size == 0 ? global_shape[d] : out.offset[d] + c.start;
  }
  return out;
}

}  // namespace

void check_coord(const Mesh& mesh, const std::vector<int64_t>& coord) {
  if (coord.size() != mesh.ndim())
    throw InvalidArgument("mesh coordinate has " + std::to_string(coord.size()) + " entries but mesh " +
                          mesh.to_string() + " has " + std::to_string(mesh.ndim()) + " dims");
  for (size_t i = 0; i < coord.size(); ++i)
    if (coord[i] < 0 || coord[i] >= mesh.shape[i])
      throw InvalidArgument("mesh coordinate " + std::to_string(coord[i]) + " on mesh dim " + std::to_string(i) +
                            " is outside mesh " + mesh.to_string() + " (expected 0 <= c < " +
                            std::to_string(mesh.shape[i]) + ")");
}

ChunkExtent shard_chunk(int64_t size, int64_t num_chunks, int64_t index) {
  if (num_chunks <= 0) throw InvalidArgument("shard_chunk: num_chunks must be positive");
  if (size % num_chunks == 0) {
    int64_t full = size / num_chunks;
    return {full, full * index};
  }
  int64_t full = (size + num_chunks - 1) / num_chunks;
  int64_t start = full * index;
  int64_t end = std::min(size, start + full);
  return {std::max<int64_t>(0, end - start), std::min(size, start)};
}

LocalLayout local_layout(const std::vector<int64_t>& global_shape, const Mesh& mesh, const PlacementSpec& spec,
                         const std::vector<int64_t>& coord) {
  PlacementSpec s = checked_spec(global_shape, mesh, spec);
  check_coord(mesh, coord);
  return apply_shards(global_shape, mesh, s, mesh.ndim(), coord);
}

std::vector<int64_t> max_local_shape(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                     const PlacementSpec& spec) {
  // The first chunk of every split is the largest, and ceil-splitting is
  // monotone in the size being split, so coordinate 0 holds the maximum.
  PlacementSpec s = checked_spec(global_shape, mesh, spec);
  return apply_shards(global_shape, mesh, s, mesh.ndim(), std::vector<int64_t>(mesh.ndim(), 0)).shape;
}

std::vector<LocalLayout> all_local_layouts(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                           const PlacementSpec& spec) {
  PlacementSpec s = checked_spec(global_shape, mesh, spec);
  std::vector<LocalLayout> out;
  out.reserve(static_cast<size_t>(mesh.size()));
  for (int64_t r = 0; r < mesh.size(); ++r)
    out.push_back(apply_shards(global_shape, mesh, s, mesh.ndim(), mesh.coordinate(r)));
  return out;
}

std::vector<int64_t> logical_shape(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                   const PlacementSpec& spec, int mesh_dim, const std::vector<int64_t>& coord) {
  PlacementSpec s = checked_spec(global_shape, mesh, spec);
  check_coord(mesh, coord);
  if (mesh_dim < 0 || static_cast<size_t>(mesh_dim) >= mesh.ndim())
    throw InvalidArgument("mesh dim " + std::to_string(mesh_dim) + " is out of range for mesh " + mesh.to_string());
  return apply_shards(global_shape, mesh, s, static_cast<size_t>(mesh_dim), coord).shape;
}

}  // namespace tlm
