// Why a plan replicates everything, in one line a user can act on. A plan in which
// every op and parameter is replicated on every mesh dim is what the solver picks
// when splitting the work costs more communication than the compute it saves (a
// small model, a small batch). The reason is read from the cost model: the ops with
// the most compute are each priced in every sharded strategy with the rest of the
// plan kept (explain.h), and the alternative that comes closest to paying for
// itself is reported with the compute it saves and the communication it adds.
#pragma once

#include <string>

#include "core/cost_model.h"
#include "core/graph.h"
#include "core/plan.h"
#include "core/strategy.h"

namespace tlm {

struct ReplicationReason {
  bool all_replicated = false;  // every placement of every node's inputs and outputs is R
  int node = -1;                // the op of the closest alternative; -1: no op has a sharded one
  std::string name, op;
  OpStrategy alternative;
  double compute_saved_s = 0;  // the op's compute replicated minus in the alternative
  double comm_added_s = 0;     // communication in and out the alternative adds, the rest of the plan kept
  int ops_priced = 0;          // ops with compute whose alternatives were priced
};

// `plan` must be the plan of `g`. Prices at most `max_ops` ops (the ones with the
// most compute: where sharding saves the most); nothing is priced when the plan
// shards anything (all_replicated false).
ReplicationReason replication_reason(const Graph& g, const Plan& plan, const CostModel& cm,
                                     const StrategyOptions& strategy_options, int optimizer_states, bool train,
                                     int max_ops = 64);

}  // namespace tlm
