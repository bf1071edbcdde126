// State held plain. parallelize holds a module's parameters and buffers as plain tensors
// where its plan replicates every one of them (replicated_state="plain", as DDP holds
// them), and as DTensors otherwise. The cost tables price each parameter's optimizer step
// as DTensors run it, with DTensor's per-kernel dispatch (optimizer_kernel_overhead_s),
// which plain state does not pay: the whole-plan condition a per-node price cannot see.
// These functions price a plan's state as the runtime will hold it.
#pragma once

#include <cstdint>

#include "core/cost_model.h"
#include "core/graph.h"
#include "core/plan.h"

namespace tlm {

// Whether `plan` keeps every parameter and buffer of `g` replicated on every mesh dim.
bool replicates_all_state(const Graph& g, const Plan& plan);

// Bytes per rank the state takes replicated: every parameter with its gradient and
// `optimizer_states` tensors of its size, every buffer once.
int64_t replicated_state_bytes(const Graph& g, int optimizer_states);

// The optimizer's dispatch a train step would pay over g's parameters held as DTensors
// (each charged an optimizer step in the cost tables): what holding them plain saves.
double state_dispatch_seconds(const Graph& g, const CostModel& cm, int optimizer_states);

// `plan` priced with its state held plain: each parameter's optimizer step (in its node's
// compute_s) less its dispatch, and the summary's compute and step with it. Only for a
// train plan that replicates all state; returns the seconds taken off (0 otherwise).
double price_state_plain(const Graph& g, const CostModel& cm, int optimizer_states, Plan& plan);

}  // namespace tlm
