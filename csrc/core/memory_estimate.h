// Per-rank memory of a planned training step, by kind: what the plan prints and
// what measured peaks are compared with (benchmarks/step_time.py).
//
// The step is the joint graph in its order: every value lives from the node that
// makes it to its last use; a parameter's gradient that nothing else reads is reduced
// as soon as it is made (the runtime's buckets under the overlap schedule) and held
// from then to the end in its parameter's spec; a redistributed input lives
// while its consumer runs (gathered parameters are freed after use and gathered
// again for backward, the runtime's reshard after forward). Parameters, buffers and
// optimizer state persist across steps.
#pragma once

#include <cstdint>
#include <vector>

#include "core/graph.h"
#include "core/strategy.h"

namespace tlm {

struct MemoryEstimate {
  int64_t parameters = 0;       // parameter shards (and buffers)
  int64_t gradients = 0;        // parameter gradients, each in its parameter's spec
  int64_t optimizer_state = 0;  // optimizer_states x the parameter shards (AdamW: 2)
  int64_t activations = 0;      // live values at the step's peak, gradients made so far excluded
  int64_t peak = 0;             // parameters + optimizer state + the step's live values at its peak
  // The step's live values (activations, gradients, redistributed inputs) while each
  // non-state node runs, for reports: timeline_bytes[k] during IR node timeline_nodes[k].
  // Parameters and optimizer state come on top, for the whole step.
  std::vector<int> timeline_nodes;
  std::vector<int64_t> timeline_bytes;
  std::vector<int64_t> timeline_buffers;  // of timeline_bytes[k]: inputs redistributed for that node
};

// `chosen`: the strategy per node, the output node's (its inputs: each graph
// output's spec) last. `recomputed` (per node, or empty): values backward
// recomputes (recompute.h), held over their forward span and again from backward's
// first read of them, not in between.
MemoryEstimate estimate_memory(const Graph& g, const std::vector<OpStrategy>& chosen, int optimizer_states,
                               const std::vector<char>& recomputed = {});

}  // namespace tlm
