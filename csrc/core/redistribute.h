// Redistribution plans: the collectives that turn a tensor in one placement
// spec into another, per mesh dim, with DTensor's redistribute semantics.
//
// The runtime (torch_localmap/runtime/redistribute.py) executes these steps
// with _c10d_functional collectives; the cost model prices them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mesh.h"
#include "placement.h"

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

struct RedistributePlan {
  std::vector<CollectiveStep> steps;  // in execution order
};

// Throws InvalidArgument when DTensor refuses the transition (for example
// Partial(max) -> Partial(sum), or Shard -> Partial); the message names both specs.
RedistributePlan plan_redistribute(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                   const PlacementSpec& src, const PlacementSpec& dst);

// Whether plan_redistribute would succeed.
bool can_redistribute(const PlacementSpec& src, const PlacementSpec& dst);

}  // namespace tlm
