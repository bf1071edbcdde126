#include "core/strategies/shard_math.h"

namespace tlm::strategies {

Extent local_extent(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim,
                    const std::vector<int64_t>& coord) {
  Extent e{0, size};
  for (size_t m = 0; m < spec.size(); ++m) {
    if (!spec[m].is_shard(dim)) continue;
    Extent sub = chunk_extent(e.length, mesh.shape[m], coord[m]);
    e.offset += sub.offset;
    e.length = sub.length;
  }
  return e;
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * std::max<int64_t>(shape[i], 1);
  return st;
}

bool dense_strides(const std::vector<int64_t>& size, const std::vector<int64_t>& stride) {
  if (stride.size() != size.size()) return false;
  const auto want = contiguous_strides(size);
  for (size_t d = 0; d < size.size(); ++d)
    if (size[d] > 1 && stride[d] != want[d]) return false;
  return true;
}

std::vector<int64_t> local_shape(const std::vector<int64_t>& shape, const Mesh& mesh, const PlacementSpec& spec,
                                 const std::vector<int64_t>& coord) {
  std::vector<int64_t> out(shape);
  for (size_t m = 0; m < spec.size(); ++m) {
    if (!spec[m].is_shard()) continue;
    auto& s = out[spec[m].dim];
    s = chunk_extent(s, mesh.shape[m], coord[m]).length;
  }
  return out;
}

std::vector<int64_t> largest_local_shape(const std::vector<int64_t>& shape, const Mesh& mesh,
                                         const PlacementSpec& spec) {
  std::vector<int64_t> out(shape);
  for (size_t m = 0; m < spec.size(); ++m) {
    if (!spec[m].is_shard()) continue;
    auto& s = out[spec[m].dim];
    s = chunk_extent(s, mesh.shape[m], 0).length;
  }
  return out;
}

int64_t largest_local_numel(const std::vector<int64_t>& shape, const Mesh& mesh, const PlacementSpec& spec) {
  int64_t n = 1;
  for (auto s : largest_local_shape(shape, mesh, spec)) n *= s;
  return n;
}

std::vector<int> mesh_dims_sharding(const PlacementSpec& spec, int dim) {
  std::vector<int> out;
  for (size_t m = 0; m < spec.size(); ++m)
    if (spec[m].is_shard(dim)) out.push_back(static_cast<int>(m));
  return out;
}

static void extents_rec(const Mesh& mesh, const std::vector<int>& dims, size_t level, Extent cur,
                        std::vector<Extent>& out) {
  if (level == dims.size()) {
    out.push_back(cur);
    return;
  }
  const int64_t parts = mesh.shape[dims[level]];
  for (int64_t i = 0; i < parts; ++i) {
    Extent sub = chunk_extent(cur.length, parts, i);
    extents_rec(mesh, dims, level + 1, Extent{cur.offset + sub.offset, sub.length}, out);
  }
}

std::vector<Extent> all_extents(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim) {
  std::vector<Extent> out;
  extents_rec(mesh, mesh_dims_sharding(spec, dim), 0, Extent{0, size}, out);
  return out;
}

bool evenly_sharded(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim) {
  // Nested even splits stay even, and an uneven split at any level leaves
  // some rank with fewer elements, so divisibility level by level decides it.
  for (size_t m = 0; m < spec.size(); ++m) {
    if (!spec[m].is_shard(dim)) continue;
    if (size % mesh.shape[m] != 0) return false;
    size /= mesh.shape[m];
  }
  return true;
}

bool no_empty_shard(int64_t size, const Mesh& mesh, const PlacementSpec& spec, int dim) {
  for (const auto& e : all_extents(size, mesh, spec, dim))
    if (e.length == 0) return false;
  return true;
}

}  // namespace tlm::strategies
