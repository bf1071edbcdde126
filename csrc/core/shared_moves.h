// Which moves the rank program makes once and hands to every reader.
//
// The plan prices a redistribution per reading edge, and the rank program moves a value
// per reader (torch_localmap/_spmd.py): a gathered activation or parameter kept for a
// later reader would hold memory the plan does not count. A move that gathers nothing
// (an all-reduce, a reduce-scatter, an all-to-all, a slice) makes a local tensor no
// larger than its source. When every reader of the value wants that same spec, the
// source has no reader of its own, so moving once and keeping the result until its
// last reader holds no more than the per-reader program holds the source: one
// collective instead of one per reader, within the plan's memory. Under like="tp" the
// norm's input and weight gradients both read the Partial gradient of its output as
// Replicate, and the program all-reduced it twice.
#pragma once

#include <vector>

#include "core/graph.h"
#include "core/placement.h"
#include "core/plan.h"

namespace tlm {

struct SharedMove {
  TensorRef value;   // the node output moved
  PlacementSpec to;  // the spec all its readers take it in
};

// The moves of `plan` (of `g`) made once for all readers: values read by two or more
// tensor inputs (a node reading it twice counts twice; graph outputs count), all in one
// spec other than the one it is made in, by a move that leaves no mesh dim it shards
// unsharded, made by a node the plan keeps (not recomputed in backward). In node order.
// The same on every rank: the program's collectives must match across ranks.
std::vector<SharedMove> shared_moves(const Graph& g, const Plan& plan);

}  // namespace tlm
