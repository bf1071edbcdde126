// Stage 2 of the planner: cost tables. Input: the IR graph and every node's
// strategies (stage 1, strategy.h). Output: what each choice costs, as the
// solver's Problem -- per node and strategy its compute time and the bytes it
// holds, per (producer, consumer) pair the redistribution time between every
// pair of their strategies -- plus the graph outputs' sinks and the boundary
// rules (pins, parameter-gradient couplings) of the planning mode.
//
// Costs are integer picoseconds (to_cost). Redistribution times repeat across
// layers and are computed once per (tensor meta, src spec, dst spec) in
// RedistCostCache, which later stages also use to price the chosen edges.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/cost_model.h"
#include "core/graph.h"
#include "core/solver/problem.h"
#include "core/strategy.h"

namespace tlm {

// Picoseconds, the solver's integer cost unit (exact sums; 1 ps resolution is
// far below any op's time, and int64 holds 106 days of it).
solver::Cost to_cost(double seconds);
inline double to_seconds(solver::Cost c) { return static_cast<double>(c) * 1e-12; }

// Boundary rules of a planning mode (planner.h explains the two modes). IR
// roles of placeholders: "param", "buffer" (target: FQN), "input" (target: the
// flat input index), "tangent" (extra.output: the output index it is the
// gradient of), "constant"; of graph outputs: "output" (target: index),
// "grad" (a parameter's), "mutation" (a buffer's new value), "input_grad".
struct BoundaryPolicy {
  bool train = true;  // "train": state and outputs free, tied to their gradients; "compile": all replicated
  // Parameters and buffers whose spec the caller fixed (hand plans, user
  // constraints, the placements of an already parallelized module), by FQN.
  std::map<std::string, PlacementSpec> fixed_params;
  // User inputs that arrive in a given spec (data-loader shards, DTensor
  // inputs), by flat input index; the others arrive replicated.
  std::map<std::string, PlacementSpec> input_specs;
  // Forward outputs (and so their gradients) whole on every rank.
  bool replicate_outputs = false;
  // Forward outputs (by output target) that leave whole on every rank even when
  // the others may leave sharded: leaves of containers that compute on them.
  std::set<std::string> replicated_outputs;
  // Train mode: tensors of a parameter's size the optimizer keeps (they and
  // the parameters occupy memory for the whole step).
  int optimizer_states = 0;
  // "ddp" or "fsdp2": torch's data-parallel plans. Parameters not in fixed_params
  // are pinned (DDP: replicated; FSDP2: Shard(0) on every mesh dim where their
  // first dim allows it), buffers replicated, user inputs not in input_specs split
  // over their first (batch) dim, and only state communicates: an
  // edge from anything but a parameter or buffer moves no data between ranks
  // unless its tensor is a scalar (the loss), so activations stay on the rank
  // whose batch shard made them and parameter gradients are reduced into their
  // sinks. "tp": torch's tensor-parallel styles (ColwiseParallel / RowwiseParallel,
  // their placements given by fixed_params): parameters not in fixed_params and buffers
  // replicated, user inputs not in input_specs replicated (every rank the whole batch),
  // and no edge from a parameter or buffer, or from a view or cast of one, communicates,
  // so each is read where it is kept and only activations move. "": no such restriction.
  std::string like;
  // Train mode: the solver may recompute values backward reads instead of keeping
  // them (recompute.h). Not under `like` unless with recompute_only.
  bool recompute = false;
  // With `recompute`: a fixed policy instead of the solver's choice (activation
  // checkpointing as torchtitan's full / selective modes run it): exactly the
  // candidates named here (IR node names) are recomputed, every other value is kept.
  std::optional<std::set<std::string>> recompute_only;
  // The runtime's gradient bucket cap in bytes (parallelize's bucket_cap_mb, DDP's
  // name; 0: no buckets). Gradients are reduced in buckets of up to this many bytes,
  // so a gradient's reduction pays its share of one collective's fixed cost, by bytes,
  // not a fixed cost of its own (RedistCostCache::meta_id's `bucket`); parameter
  // gathers travel in per-unit buckets of at most this many bytes (gather_units.h).
  int64_t bucket_bytes = 25 << 20;
};

// The torch plans a BoundaryPolicy::like may name (Python's parallelize(like=) reads this list).
const std::vector<std::string>& like_plans();
// Whether `like` is "" (no restriction) or one of like_plans().
bool known_like(const std::string& like);

// How the runtime issues the collectives on one edge: alone (bytes 0), or as members of a
// bucket of `bytes` (bucketing.py). `gathers_only`: only its all-gathers are bucketed (a
// parameter's gather joins its unit's bucket; anything else it needs is issued alone).
struct BucketShare {
  int64_t bytes = 0;
  bool gathers_only = false;
};

// Redistribution time between specs of one tensor meta, cached. Specs and
// metas are interned to small integers so edge loops touch no strings.
class RedistCostCache {
 public:
  RedistCostCache(const CostModel& cm, const Mesh& mesh) : cm_(cm), mesh_(mesh) {}
  int spec_id(const PlacementSpec& s);
  // `bucket`: the tensor's collectives travel in a bucket of that many bytes with others
  // of their kind (gradient reductions, parameter gathers per unit): each pays the
  // collective's latency x min(1, bytes / bucket.bytes) instead of the whole latency, and
  // the copies into and out of the bucket's flat buffer. A bucketed meta is a meta of its
  // own (its own cost rows and matrices).
  int meta_id(const TensorMeta& t, BucketShare bucket = {});
  solver::Cost get(int meta, int src, int dst);
  solver::Cost get(const TensorMeta& t, const PlacementSpec& src, const PlacementSpec& dst, BucketShare bucket = {}) {
    return get(meta_id(t, bucket), spec_id(src), spec_id(dst));
  }
  // Bytes of the largest local shard of meta `meta` under spec `spec`, cached.
  int64_t shard_bytes(int meta, int spec) { return local_bytes(meta, table(meta), spec); }
  size_t size() const { return computed_; }
  const PlacementSpec& spec(int id) const { return specs_.at(static_cast<size_t>(id)); }

 private:
  const CostModel& cm_;
  const Mesh& mesh_;
  std::unordered_map<std::string, int> spec_ids_, meta_ids_;
  std::unordered_map<uint64_t, int> packed_ids_;  // specs that pack into one integer (cost_tables.cpp)
  std::vector<PlacementSpec> specs_;
  std::vector<TensorMeta> metas_;
  std::vector<BucketShare> bucket_;  // by meta id
  // Per meta, a dense table over the specs seen with that meta: edge loops
  // look up tens of millions of pairs on 3-D meshes, and a hash lookup per
  // pair was most of the table build. -1 marks a pair (or bytes) not computed yet.
  struct MetaTable {
    std::vector<int> local;                  // global spec id -> row/column, or -1
    std::vector<std::vector<solver::Cost>> rows;
    std::vector<int64_t> bytes;              // by row: the largest local shard's bytes
  };
  // A spec pair's redistribution plan: its steps depend on the specs and the
  // mesh, never on the tensor's sizes, so each pair is planned once and
  // priced per meta from the bytes of the specs its steps pass through.
  struct PairStep {
    CollectiveKind kind;
    int mesh_dim;
    ReduceOp reduce;
    int before, after;  // spec ids
    int tensor_dim;     // AllGather: the dim gathered; ReduceScatter: the dim scattered onto
  };
  struct PairPlan {
    bool refused = false;  // DTensor refuses the transition: +infinity
    std::vector<PairStep> steps;
  };
  MetaTable& table(int meta);
  size_t local(MetaTable& t, int spec);
  const PairPlan& pair_plan(int src, int dst);
  int64_t local_bytes(int meta, MetaTable& t, int spec);
  solver::Cost price(int meta, MetaTable& t, int src, int dst);
  std::vector<MetaTable> tables_;
  std::unordered_map<uint64_t, int> pair_ids_;  // (src << 32 | dst) -> pairs_ index
  std::vector<PairPlan> pairs_;
  size_t computed_ = 0;
};

// A graph output: the problem node standing for "where it must leave", one
// candidate spec per sink strategy (add_sinks says which, per role).
struct OutputSink {
  TensorRef ref;
  std::string role;    // "output" | "grad" | "input_grad"
  std::string target;  // parameter name for grads
  int problem_node = -1;
  std::vector<PlacementSpec> specs;
  int coupled_param = -1;  // IR node whose spec this sink's spec equals: parameter, buffer or tangent
  // A parameter's gradient: its reduction is bucketed with the others' (BoundaryPolicy::bucket_bytes).
  bool bucketed() const { return role == "grad"; }
};

// A value the solver may recompute in backward (recompute.h): a candidate's problem
// nodes, or a need node of a value only recomputed for a candidate (tail -1).
struct RecomputeSite {
  int node = -1;  // IR node (and its own problem node: the forward span)
  int hold = -1;  // problem node: strategy 2s keeps (is not needed) in strategy s, 2s + 1 recomputes it
  int tail = -1;  // problem node: its bytes while backward reads it; -1 for a need node
};

struct CostTables {
  // Problem node i < graph nodes - 1 is IR node i; sinks follow, then the
  // recompute sites' hold and tail nodes. Strategy k of
  // node i is strategies[i].strategies[k]; its cost is compute, its usage bytes.
  solver::Problem problem;
  std::vector<OutputSink> sinks;
  std::vector<int> sink_of_output;  // graph output j -> index into sinks, or -1 (not a tensor)
  std::vector<RecomputeSite> recompute;  // BoundaryPolicy::recompute: values backward may recompute
  // By IR node: its input's value only becomes parameter gradients (gradient_tails in
  // cost_tables.cpp), so a reduction on the edge into it is bucketed with theirs.
  std::vector<char> bucketed_inputs;
  // By IR node: a parameter as read, the bytes of its gather unit's bucket (gather_units.h).
  std::vector<int64_t> gather_buckets;
  int64_t bucket_bytes = 0;  // BoundaryPolicy::bucket_bytes
  RedistCostCache redist;
  // Counts for benchmarks (also without dense matrices, see build_only).
  int64_t edge_count = 0;
  int64_t edge_matrix_entries = 0;

  CostTables(const CostModel& cm, const Mesh& mesh) : redist(cm, mesh) {}
};

// How the runtime issues the collectives on the edge from `r` into IR node `v`, and on the
// way into a graph output's sink: the solver's edges and the plan's summary both price them
// with these, so the two agree.
BucketShare input_bucket(const Graph& g, const CostTables& t, int v, const TensorRef& r);
BucketShare sink_bucket(const CostTables& t, const OutputSink& s);

// Builds every table. With `materialize_edges` false the edge matrices are
// only counted (3-D/4-D meshes: gigabytes), for benchmarks of this stage.
// Throws InvalidArgument for fixed parameters that are unknown or do not fit.
void build_cost_tables(const Graph& g, const std::vector<NodeStrategies>& strategies, const CostModel& cm,
                       const BoundaryPolicy& policy, std::optional<int64_t> memory_limit, bool materialize_edges,
                       CostTables& out);

}  // namespace tlm
