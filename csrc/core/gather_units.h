// Which parameters the runtime gathers in one bucket, and how big that bucket is.
//
// FSDP2 gathers a wrapped module's parameters as one flat buffer; the runtime does the
// same per gather unit (torch_localmap/_runtime/bucketing.py): a parameter's unit is its
// FQN up to the first list index -- a transformer block -- else its module, and a unit too
// small to pay for a collective of its own shares its neighbour's bucket. The cost model
// prices a parameter's gather as its share of that bucket (cost_tables.cpp), so the rules
// live here once, for both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"

namespace tlm {

// A unit below this many bytes shares a neighbour's bucket: under it a collective's fixed
// cost outweighs its bytes (NCCL's latency at ~100 GB/s is worth ~1 MB; gloo's more).
constexpr int64_t kSmallUnitBytes = int64_t{1} << 20;

// "layers.3" of "layers.3.attention.wq.weight"; "norm" of "norm.weight"; "" of "bias".
std::string gather_unit(const std::string& fqn);

// Units in the order they are first used, with their bytes: per unit the index of the
// first unit of its bucket. A unit joins the bucket before it when either is under
// kSmallUnitBytes, so large units keep their own and nothing large is gathered early.
std::vector<int> small_unit_groups(const std::vector<int64_t>& unit_bytes);

// Per IR node: for a parameter as a module reads it (the "param" placeholder or a chain of
// single-input ops on it -- its transpose, a mixed-precision cast), the bytes of the bucket
// its gather travels in: its units' full bytes, at most `cap_bytes`. 0 for every other
// node, and everywhere when `cap_bytes` is 0 (the runtime buckets nothing).
std::vector<int64_t> gather_bucket_bytes(const Graph& g, int64_t cap_bytes);

}  // namespace tlm
