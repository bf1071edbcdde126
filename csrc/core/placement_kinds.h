// Everything that depends on a placement's kind, in one table.
//
// A kind's row says how it is spelled, what a rank holds under it (a chunk of
// one tensor dim, or the whole tensor), whether its values are pending
// contributions to a reduction, and what its gradient's placement is. The
// transition table says what one mesh dim does to go from one kind to another:
// a collective, a local rewrite, nothing, or DTensor's refusal. Parsing and
// printing (placement.cpp), local shapes (layout.cpp, region.cpp), gradients
// (region.cpp), redistribution plans (redistribute.cpp) and, through the
// collective kinds, the cost model all ask these tables. A new kind adds a row
// here, a row and column of transitions, and its tests.
#pragma once

#include "core/placement.h"
#include "core/redistribute.h"

#include <vector>

namespace tlm {

struct KindInfo {
  Placement::Kind kind;
  const char* name;      // torch's class name (Shard, Replicate, Partial): what Python maps to
  char letter;           // 'R', 'S(d)', 'P(op)': the spelling's first letter
  bool takes_dim;        // spelled with a tensor dim: S(d)
  bool takes_reduce_op;  // spelled with a reduce op: P(sum)
  bool splits_dim;       // a rank holds a torch.chunk-style piece of `dim`; else the whole tensor
  bool pending;          // each rank holds a contribution; the value is their reduction
  Placement::Kind gradient;  // the gradient of a value placed so (DTensor's to_local rule)
};
const KindInfo& kind_info(Placement::Kind kind);
// Every kind, in Kind order: what the Python converter (torch_localmap/placements.py)
// and its tests iterate over, so a new row reaches them without a Python edit.
const std::vector<KindInfo>& all_kinds();
// The kind spelled by `letter`, or nullptr.
const KindInfo* kind_by_letter(char letter);

// One mesh dim's step from one kind to another (the placements differ).
struct KindTransition {
  bool allowed;
  CollectiveKind step;  // when allowed
  const char* refusal;  // when not: DTensor's reason
};
const KindTransition& transition(Placement::Kind from, Placement::Kind to);

}  // namespace tlm
