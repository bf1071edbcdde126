// Redistribution plans: the collectives that turn a tensor in one placement
// spec into another, per mesh dim, with DTensor's redistribute semantics.
//
// The runtime (torch_localmap/runtime/redistribute.py) executes these steps
// with _c10d_functional collectives; the cost model prices them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/mesh.h"
#include "core/placement.h"

namespace tlm {

enum class CollectiveKind : uint8_t {
  AllGather,      // Shard(src_dim) -> Replicate on mesh_dim
  ReduceScatter,  // Partial(reduce) -> Shard(dst_dim)
  AllReduce,      // Partial(reduce) -> Replicate
  AllToAll,       // Shard(src_dim) -> Shard(dst_dim)
  LocalChunk,     // Replicate -> Shard(dst_dim): keep this rank's chunk, no communication
  LocalPartition  // Replicate -> Partial(reduce): local rewrite (e.g. zero on all but one rank), no communication
};
const char* to_string(CollectiveKind k);

struct CollectiveStep {
  CollectiveKind kind;
  int mesh_dim = 0;
  int src_dim = -1;  // tensor dim sharded before (AllGather, AllToAll)
  int dst_dim = -1;  // tensor dim sharded after (ReduceScatter, AllToAll, LocalChunk)
  ReduceOp reduce = ReduceOp::Sum;
  // Global shape and spec in force just before this step (the runtime needs
  // them for uneven shards; the cost model for byte counts).
  std::vector<int64_t> shape;
  PlacementSpec before;
  PlacementSpec after;
};

// Semantics (torch 2.13 _redistribute.py, greedy planner, default shard order):
// * 1-D mesh: one direct transition.
// * N-D mesh: when the source shards anything (over >1 rank in total), walk mesh
//   dims from inner to outer; a Shard target whose tensor dim is sharded by a
//   different set of earlier mesh dims in source and target is first replicated
//   (nested sharding must be undone inner-first); then walk outer to inner for
//   what remains (only Replicate -> Shard chunks at that point).
// * Steps on mesh dims of size 1 are left out: DTensor short-cuts them without
//   touching the data (and without refusing anything). The placement on such a
//   dim can therefore differ between one step's `after` and the next's `before`.
// * Refused (InvalidArgument): Shard -> Partial, Partial(x) -> Partial(y) with
//   x != y, and specs mixing Partial kinds other than {sum, avg}.
struct RedistributePlan {
  std::vector<CollectiveStep> steps;  // in execution order
};

// Throws InvalidArgument when DTensor refuses the transition (for example
// Partial(max) -> Partial(sum), or Shard -> Partial); the message names both specs.
RedistributePlan plan_redistribute(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                   const PlacementSpec& src, const PlacementSpec& dst);

// One step as the runtime's merging passes see it (merged_step_runs).
struct StepKey {
  CollectiveKind kind = CollectiveKind::AllReduce;
  int mesh_dim = 0;
  int tensor_dim = -1;  // AllGather: the dim gathered; ReduceScatter: the dim scattered onto
  ReduceOp reduce = ReduceOp::Sum;
  bool whole = true;  // AllGather / ReduceScatter: every piece of tensor_dim whole (whole_pieces)
};
// `before` / `after`: the specs in force before and after the step.
StepKey step_key(CollectiveKind kind, int mesh_dim, int tensor_dim, ReduceOp reduce, const PlacementSpec& before,
                 const PlacementSpec& after, const std::vector<int64_t>& global_shape, const Mesh& mesh);
StepKey step_key(const CollectiveStep& step, const std::vector<int64_t>& global_shape, const Mesh& mesh);
// Whether `spec` cuts dim `tensor_dim` of `global_shape` into whole pieces: its size divides
// by the ranks of every mesh dim sharding it.
bool whole_pieces(const PlacementSpec& spec, int tensor_dim, const std::vector<int64_t>& global_shape,
                  const Mesh& mesh);

// Consecutive steps of a plan that the runtime issues as one collective over the combined
// process group of their mesh dims (torch_localmap/_runtime/fuse_reductions.py and
// fuse_gathers.py), so that the cost model prices what runs:
// * all-reduces of one reduce op, over any number of mesh dims;
// * two reduce-scatters onto one tensor dim, over mesh dims a then a + 1, or two all-gathers
//   off one, over a + 1 then a (the combined group's rank order nests them), where every
//   piece is whole (the runtime also merges some padded chains; those are priced per dim).
// Only runs whose mesh dims are consecutive (lo_dim..hi_dim, dims of one rank between them
// skipped) merge here: the combined group of such dims is one dim of the mesh with them
// flattened, which the topology model prices; the runtime's merges over other sets are
// priced per dim. Each run is [begin, end) into `steps`.
struct StepRun {
  size_t begin = 0, end = 0;
  int lo_dim = 0, hi_dim = 0;
};
std::vector<StepRun> merged_step_runs(const std::vector<StepKey>& steps, const Mesh& mesh);
// The same for the steps of plan_redistribute(global_shape, mesh, ...).
std::vector<StepRun> merged_step_runs(const std::vector<CollectiveStep>& steps, const std::vector<int64_t>& global_shape,
                                      const Mesh& mesh);

// Whether plan_redistribute would succeed on a mesh whose dims all have more
// than one rank (the strict answer; see the Mesh overload).
bool can_redistribute(const PlacementSpec& src, const PlacementSpec& dst);
// Whether plan_redistribute would succeed on `mesh`. DTensor skips mesh dims of
// size 1 entirely, so transitions it refuses elsewhere (Shard -> Partial) pass there.
bool can_redistribute(const Mesh& mesh, const PlacementSpec& src, const PlacementSpec& dst);

}  // namespace tlm
