#include "core/placement_kinds.h"

#include <iterator>

namespace tlm {
namespace {

using K = Placement::Kind;

// kind         name         letter dim    op     splits pending gradient
constexpr KindInfo kKinds[] = {
    {K::Replicate, "Replicate", 'R', false, false, false, false, K::Replicate},
    {K::Shard,     "Shard",     'S', true,  false, true,  false, K::Shard},
    // A Partial value's gradient is replicated: every rank's contribution gets
    // the whole gradient (torch.distributed.tensor DTensor.to_local).
    {K::Partial,   "Partial",   'P', false, true,  false, true,  K::Replicate},
};

constexpr KindTransition kNone{true, CollectiveKind::LocalChunk, nullptr};  // unused: equal placements take no step

// kTransitions[from][to], in Kind order (Replicate, Shard, Partial). Shard -> Shard
// means a different tensor dim (the same dim is equal placements).
constexpr KindTransition kTransitions[3][3] = {
    /* from R */ {kNone,
                  {true, CollectiveKind::LocalChunk, nullptr},
                  {true, CollectiveKind::LocalPartition, nullptr}},
    /* from S */ {{true, CollectiveKind::AllGather, nullptr},
                  {true, CollectiveKind::AllToAll, nullptr},
                  {false, CollectiveKind::AllGather, "DTensor does not support Shard -> Partial"}},
    /* from P */ {{true, CollectiveKind::AllReduce, nullptr},
                  {true, CollectiveKind::ReduceScatter, nullptr},
                  {false, CollectiveKind::AllReduce, "DTensor does not convert between Partial kinds"}},
};

}  // namespace

const KindInfo& kind_info(Placement::Kind kind) { return kKinds[static_cast<int>(kind)]; }

const std::vector<KindInfo>& all_kinds() {
  static const std::vector<KindInfo> kinds(std::begin(kKinds), std::end(kKinds));
  return kinds;
}

const KindInfo* kind_by_letter(char letter) {
  for (const auto& k : kKinds)
    if (k.letter == letter) return &k;
  return nullptr;
}

const KindTransition& transition(Placement::Kind from, Placement::Kind to) {
  return kTransitions[static_cast<int>(from)][static_cast<int>(to)];
}

}  // namespace tlm
