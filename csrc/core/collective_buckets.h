// Which collectives of a rank program travel together in one flat buffer.
//
// gloo and NCCL pay a fixed price per collective (a launch, a rendezvous of the
// ranks, a pipeline that fills) that a parameter's gradient of a few hundred
// kilobytes does not amortise. torch's DDP reducer copies gradients into buckets
// of bucket_cap_mb (25 MiB) in the order backward produces them and reduces each
// bucket once it is full; FSDP2 gathers and reduce-scatters a module's
// parameters as one flat buffer. This is the same decision for any rank
// program: collectives of one kind, reduce op, group and dtype are packed in the
// order their inputs become ready, up to a byte cap, so a bucket is issued as
// soon as its last member's input exists.
//
// A member may join a bucket only if no other member's result feeds its input
// (directly or through any chain of nodes): the merged collective would wait on
// itself. Everything else -- the order of compute, where the wait lands -- is
// left to the overlap schedule (overlap_schedule.h), which runs after the
// buckets are formed.
#pragma once

#include <cstdint>
#include <vector>

#include "core/overlap_schedule.h"

namespace tlm {

// `nodes`: the program in a valid order (overlap_schedule.h's description).
// `keys[i]`: for a Start, its compatibility class (equal keys may share a
// bucket: same collective, reduce op, group and dtype); -1: never bucketed.
// Returns per node a bucket id (0, 1, ... in issue order) for Starts that share
// a bucket with at least one other Start, else -1. A bucket holds at most
// `cap_bytes` unless its first member alone is larger. `first_cap_bytes[k]`
// (> 0; absent or 0: `cap_bytes`) caps the first bucket of key k alone, as DDP's
// reducer caps its first gradient bucket at 1 MiB: the last layers' gradients are
// then reduced while the rest of backward runs instead of waiting for a full
// bucket. Deterministic: a property of the graph alone, so every rank forms the
// same buckets.
std::vector<int> collective_buckets(const std::vector<ScheduleNode>& nodes, const std::vector<int>& keys,
                                    int64_t cap_bytes, const std::vector<int64_t>& first_cap_bytes = {});

}  // namespace tlm
