#include "core/cost_tables.h"

#include "core/gather_units.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/recompute.h"
#include "core/solver/trace.h"

namespace tlm {

solver::Cost to_cost(double seconds) {
  if (!std::isfinite(seconds)) return solver::kInfiniteCost;
  double ps = std::round(seconds * 1e12);
  if (ps >= 9.0e18) return solver::kInfiniteCost;
  return static_cast<solver::Cost>(std::max(0.0, ps));
}

namespace {

solver::Cost add_cost(solver::Cost a, solver::Cost b) {
  if (a == solver::kInfiniteCost || b == solver::kInfiniteCost) return solver::kInfiniteCost;
  return a + b;
}

int intern(std::unordered_map<std::string, int>& ids, const std::string& key) {
  auto it = ids.find(key);
  if (it != ids.end()) return it->second;
  const int next = static_cast<int>(ids.size());
  ids.emplace(key, next);
  return next;
}

// Spec ids of every strategy's inputs and outputs, interned once per node.
struct SpecIds {
  std::vector<std::vector<int>> in, out;  // [strategy][k]
};

std::vector<int> column(const std::vector<std::vector<int>>& rows, size_t k) {
  std::vector<int> c(rows.size());
  for (size_t a = 0; a < rows.size(); ++a) c[a] = rows[a][k];
  return c;
}

// Position of each spec id among the distinct ids of one list; a dense
// array reused across edges (a linear search per entry was a tenth of the
// table build on 3-D meshes, where nodes have hundreds of strategies).
class DistinctIds {
 public:
  // Fills `uniq` with the distinct ids of `ids` in first-seen order and
  // `pos[a]` with the index of ids[a] in `uniq`.
  void index(const std::vector<int>& ids, std::vector<int>& uniq, std::vector<int>& pos) {
    uniq.clear();
    pos.resize(ids.size());
    for (size_t a = 0; a < ids.size(); ++a) {
      const size_t id = static_cast<size_t>(ids[a]);
      if (slot_.size() <= id) slot_.resize(id + 1, -1);
      int& s = slot_[id];
      if (s < 0) s = static_cast<int>(uniq.size()), uniq.push_back(ids[a]);
      pos[a] = s;
    }
    for (int id : uniq) slot_[static_cast<size_t>(id)] = -1;  // clean for the next list
  }

 private:
  std::vector<int> slot_;
};

int find_output_spec(const std::vector<OpStrategy>& strategies, const PlacementSpec& spec) {
  for (size_t i = 0; i < strategies.size(); ++i)
    if (!strategies[i].outputs.empty() && strategies[i].outputs[0] == spec) return static_cast<int>(i);
  return -1;
}

// Nodes: compute time and bytes held per strategy; liveness from the last use.
// In train mode parameters and buffers are held for the whole step, and each
// parameter brings its optimizer state (same spec): the limit then bounds
// what the device really holds at the step's peak (memory_estimate.h).
void add_nodes(const Graph& g, const std::vector<NodeStrategies>& strat, const std::vector<SpecIds>& ids,
               const CostModel& cm, const BoundaryPolicy& policy, RedistCostCache& cache, solver::Problem& prob) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> last_use(n);
  for (int i = 0; i < n; ++i) last_use[i] = i;
  for (int i = 0; i < n; ++i)
    for (const auto& r : g.nodes[i].tensor_inputs) last_use[r.node] = std::max(last_use[r.node], i);
  prob.nodes.resize(n - 1);  // the output node gets no strategies of its own: sinks stand for it
  for (int i = 0; i + 1 < n; ++i) {
    const IrNode& node = g.nodes[i];
    auto& pn = prob.nodes[i];
    pn.start = i;
    pn.end = last_use[i] + 1;
    const bool state = policy.train && node.op == "placeholder" && (node.role == "param" || node.role == "buffer");
    const int64_t copies = 1 + (state && node.role == "param" ? policy.optimizer_states : 0);
    if (state) pn.start = 0, pn.end = n;
    if (strat[i].same_as >= 0) {  // a call node like an earlier one (strategy_signature.h): the same prices
      pn.strategies = prob.nodes[static_cast<size_t>(strat[i].same_as)].strategies;
      continue;
    }
    std::vector<int> out_meta;  // shard bytes repeat across strategies and layers: cached per (meta, spec)
    for (const auto& t : node.outputs) out_meta.push_back(cache.meta_id(t));
    pn.strategies.reserve(strat[i].strategies.size());
    for (size_t si = 0; si < strat[i].strategies.size(); ++si) {
      const OpStrategy& s = strat[i].strategies[si];
      solver::Strategy ps;
      const DType dt = node.outputs.empty() ? DType::Float32 : node.outputs[0].dtype;
      if (node.op != "placeholder") ps.cost = to_cost(cm.compute_seconds(op_work(g, i, s), dt));
      for (size_t k = 0; k < node.outputs.size(); ++k) ps.usage += cache.shard_bytes(out_meta[k], ids[i].out[si][k]);
      // Train mode: each rank updates its shard of every parameter once a step.
      if (state && node.role == "param" && !node.outputs.empty())
        ps.cost = to_cost(cm.optimizer_step_seconds(static_cast<double>(ps.usage), dt, policy.optimizer_states));
      ps.usage *= copies;
      pn.strategies.push_back(ps);
    }
  }
}

// Placeholders: in train mode parameters and buffers are free (unless fixed)
// and so are tangents (tied to their outputs by couplings); inputs arrive in
// their given spec or replicated. Returns the problem node of each free
// placeholder by role and target.
struct Placeholders {
  std::map<std::string, int> state;    // parameter / buffer FQN -> node
  std::map<std::string, int> inputs;   // flat input index -> node
  std::map<std::string, int> tangent;  // output index -> its tangent's node
};

// Where torch's plan `like` keeps a parameter or buffer (BoundaryPolicy::like): FSDP2
// shards a parameter's first dim over every mesh dim (flattened) when its strategies
// offer that; everything else is replicated, as DDP keeps it.
PlacementSpec like_state_spec(const std::string& like, const IrNode& node, const NodeStrategies& strat,
                              const PlacementSpec& rep) {
  if (like != "fsdp2" || node.role != "param" || node.outputs.at(0).ndim() == 0) return rep;
  const PlacementSpec dim0(rep.size(), Placement::shard(0));
  return find_output_spec(strat.strategies, dim0) >= 0 ? dim0 : rep;
}

// Where torch's plan `like` has a user input that arrives whole: under a data-parallel
// plan split over the batch (its first dim) on every mesh dim, as each rank's data loader
// gives it its own samples -- a local cut, no communication -- where the shape allows;
// otherwise, and under "tp" (every rank the whole batch), replicated.
PlacementSpec like_input_spec(const std::string& like, const NodeStrategies& strat, const PlacementSpec& rep) {
  if (like.empty() || like == "tp") return rep;
  const PlacementSpec batch(rep.size(), Placement::shard(0));
  return find_output_spec(strat.strategies, batch) >= 0 ? batch : rep;
}

Placeholders pin_placeholders(const Graph& g, const std::vector<NodeStrategies>& strat, const BoundaryPolicy& policy,
                              solver::Problem& prob) {
  Placeholders out;
  const PlacementSpec rep(g.mesh.ndim(), Placement::replicate());
  auto pin = [&](int i, PlacementSpec spec, const std::string& what) {
    validate_spec(spec, g.nodes[i].outputs.at(0).ndim(), g.mesh.ndim(), what);
    // Over a mesh dim of one rank a shard or a pending sum is the whole value: the
    // strategies list it as Replicate (a data loader's Shard(0) on a 1-GPU mesh is fine).
    for (size_t d = 0; d < spec.size(); ++d)
      if (g.mesh.shape[d] == 1) spec[d] = Placement::replicate();
    prob.nodes[i].pinned = find_output_spec(strat[i].strategies, spec);
    if (prob.nodes[i].pinned < 0)
      throw InvalidArgument(what + ": placement " + to_string(spec) + " is not a valid placement for its shape " +
                            "on mesh " + g.mesh.to_string());
  };
  for (int i = 0; i + 1 < static_cast<int>(g.nodes.size()); ++i) {
    const IrNode& node = g.nodes[i];
    if (node.op != "placeholder") continue;
    const std::string target = target_of(node);
    if (is_state(node) && policy.train) {
      out.state[target] = i;
      auto fixed = policy.fixed_params.find(target);
      if (fixed != policy.fixed_params.end()) pin(i, fixed->second, node.role == "param" ? "parameter '" + target + "'"
                                                                                      : "buffer '" + target + "'");
      else if (!policy.like.empty()) pin(i, like_state_spec(policy.like, node, strat[i], rep), "'" + target + "'");
    } else if (node.role == "tangent" && policy.train && !policy.replicate_outputs &&
               !(node.extra.find("output") &&
                 policy.replicated_outputs.count(node.extra.at("output").as_string("tangent extra.output")))) {
      if (const auto* of = node.extra.find("output")) out.tangent[of->as_string("tangent extra.output")] = i;
    } else if (node.role == "input") {
      out.inputs[target] = i;
      auto given = policy.input_specs.find(target);
      pin(i, given != policy.input_specs.end() ? given->second : like_input_spec(policy.like, strat[i], rep),
          "input " + target);
    } else {
      pin(i, rep, "placeholder '" + node.name + "'");
    }
  }
  for (const auto& kv : policy.fixed_params)
    if (policy.train && !out.state.count(kv.first))
      throw InvalidArgument("fixed_params names '" + kv.first + "', which is not a parameter or buffer of the model");
  for (const auto& kv : policy.input_specs)
    if (!out.inputs.count(kv.first))
      throw InvalidArgument("input_specs names input " + kv.first + ", which is not a tensor input of the graph");
  return out;
}

// What may happen on the edges into a node, from flags its exporter set:
// "keep_partial_inputs" (mixed precision: the upcast of a parameter's gradient, so the
// gradient is reduced in the wider dtype after it): a pending sum arrives unreduced;
// "no_input_redistribution" (a local_map region with redistribute_inputs=False, as
// torch's local_map refuses mismatched inputs): no collective on the way in.
enum class InputEdgeRule { Any, KeepPartial, AsProduced };

InputEdgeRule input_edge_rule(const IrNode& node) {
  auto flag = [&](const char* key) {
    const json::Value* v = node.extra.is_object() ? node.extra.find(key) : nullptr;
    return v != nullptr && v->is_bool() && v->as_bool();
  };
  if (flag("no_input_redistribution")) return InputEdgeRule::AsProduced;
  if (flag("keep_partial_inputs")) return InputEdgeRule::KeepPartial;
  return InputEdgeRule::Any;
}

void restrict_edge(const RedistCostCache& cache, InputEdgeRule rule, const std::vector<int>& src_ids,
                   const std::vector<int>& dst_ids, std::vector<solver::Cost>& m) {
  for (size_t a = 0; a < src_ids.size(); ++a) {
    const PlacementSpec& s = cache.spec(src_ids[a]);
    for (size_t b = 0; b < dst_ids.size(); ++b) {
      const PlacementSpec& d = cache.spec(dst_ids[b]);
      bool ok = true;
      if (rule == InputEdgeRule::AsProduced) {
        // No communication: each mesh dim keeps its placement, or a replicated one is
        // cut locally (a shard, or a Partial piece), which needs no collective.
        for (size_t md = 0; md < s.size() && md < d.size(); ++md)
          if (!(s[md] == d[md] || s[md].is_replicate())) ok = false;
      } else {
        for (size_t md = 0; md < s.size() && md < d.size(); ++md)
          if (s[md].is_partial() && !d[md].is_partial()) ok = false;
      }
      if (!ok) m[a * dst_ids.size() + b] = solver::kInfiniteCost;
    }
  }
}

struct IdsHash {
  size_t operator()(const std::vector<int>& v) const {
    uint64_t h = 1469598103934665603ull ^ v.size();
    for (int x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// Edge matrices, one per distinct (tensor meta, producer spec list, consumer
// spec list, input rule): equal keys give equal matrices, and a model's
// repeated layers make most edges equal, so each is priced and built once
// and the problem's edges share it (problem.h: CostMatrix).
class EdgeMatrices {
 public:
  EdgeMatrices(RedistCostCache& cache, bool materialize) : cache_(cache), materialize_(materialize) {}
  bool materialize() const { return materialize_; }

  // Null when not materializing (the pairs are still priced, for the counts).
  solver::CostMatrix get(int meta, const std::vector<int>& src_ids, const std::vector<int>& dst_ids,
                         InputEdgeRule rule) {
    const auto key = std::make_tuple(meta, list_id(src_ids), list_id(dst_ids), static_cast<int>(rule));
    auto found = built_.find(key);
    if (found != built_.end()) return found->second;
    solver::CostMatrix m = build(meta, src_ids, dst_ids, rule);
    built_.emplace(key, m);
    return m;
  }

 private:
  int list_id(const std::vector<int>& ids) {
    const auto found = lists_.find(ids);  // emplace would copy the list on every lookup
    if (found != lists_.end()) return found->second;
    return lists_.emplace(ids, static_cast<int>(lists_.size())).first->second;
  }

  // Costs are computed per distinct (src, dst) spec pair, then spread by index.
  solver::CostMatrix build(int meta, const std::vector<int>& src_ids, const std::vector<int>& dst_ids,
                           InputEdgeRule rule) {
    distinct_.index(src_ids, usrc_, src_pos_);
    distinct_.index(dst_ids, udst_, dst_pos_);
    pair_.resize(usrc_.size() * udst_.size());
    for (size_t a = 0; a < usrc_.size(); ++a)
      for (size_t b = 0; b < udst_.size(); ++b) pair_[a * udst_.size() + b] = cache_.get(meta, usrc_[a], udst_[b]);
    if (!materialize_) return nullptr;
    std::vector<solver::Cost> m(src_ids.size() * dst_ids.size());
    for (size_t a = 0; a < src_ids.size(); ++a) {
      const solver::Cost* row = &pair_[static_cast<size_t>(src_pos_[a]) * udst_.size()];
      solver::Cost* out = &m[a * dst_ids.size()];
      for (size_t b = 0; b < dst_ids.size(); ++b) out[b] = row[dst_pos_[b]];
    }
    if (rule != InputEdgeRule::Any) restrict_edge(cache_, rule, src_ids, dst_ids, m);
    return solver::make_cost_matrix(std::move(m));
  }

  RedistCostCache& cache_;
  bool materialize_;
  DistinctIds distinct_;
  std::vector<int> usrc_, udst_, src_pos_, dst_pos_;
  std::vector<solver::Cost> pair_;
  std::unordered_map<std::vector<int>, int, IdsHash> lists_;
  std::map<std::tuple<int, int, int, int>, solver::CostMatrix> built_;
};

// Edges accumulate here: several inputs from one producer share one summed edge.
class EdgeBuilder {
 public:
  EdgeBuilder(CostTables& t, bool materialize) : t_(t), matrices_(t.redist, materialize) {}
  EdgeMatrices& matrices() { return matrices_; }
  void add(int u, int v, solver::CostMatrix m) {
    const auto key = std::make_pair(u, v);
    auto it = index_.find(key);
    if (it == index_.end()) {
      index_[key] = static_cast<size_t>(t_.edge_count++);
      t_.edge_matrix_entries +=
          static_cast<int64_t>(t_.problem.nodes[u].strategies.size() * t_.problem.nodes[v].strategies.size());
      if (!matrices_.materialize()) return;
      t_.problem.edges.emplace_back(u, v, std::move(m));
    } else if (matrices_.materialize()) {  // shared matrices are read-only: the sum is a new one
      solver::CostMatrix& costs = t_.problem.edges[it->second].costs;
      std::vector<solver::Cost> sum(*costs);
      for (size_t a = 0; a < sum.size(); ++a) sum[a] = add_cost(sum[a], (*m)[a]);
      costs = solver::make_cost_matrix(std::move(sum));
    }
  }

 private:
  CostTables& t_;
  EdgeMatrices matrices_;
  std::map<std::pair<int, int>, size_t> index_;
};

// A parameter's gradient that nothing but its output reads (the usual case): the
// memory model frees its unreduced value right after it is made (add_sinks).
bool reduced_when_made(const Graph& g, const BoundaryPolicy& policy, const OutputSink& s,
                       const std::vector<int>& sinks_reading, int out_node) {
  if (!policy.train || s.role != "grad" || s.coupled_param < 0) return false;
  const IrNode& producer = g.nodes[static_cast<size_t>(s.ref.node)];
  if (producer.op == "placeholder" || producer.outputs.size() != 1 || sinks_reading[static_cast<size_t>(s.ref.node)] != 1)
    return false;
  return std::all_of(producer.users.begin(), producer.users.end(), [&](int u) { return u == out_node; });
}

// Graph outputs. Train mode: a forward output may leave in any R/S spec (the
// caller gets a DTensor) and its gradient (tangent) arrives in the same spec; a
// parameter's gradient and a buffer's new value leave in the parameter's or
// buffer's spec; an input's gradient in the input's spec. Compile mode: all
// replicated, so the compiled module returns exactly what the eager one does.
void add_sinks(const Graph& g, const std::vector<NodeStrategies>& strat, const BoundaryPolicy& policy,
               const Placeholders& ph, const std::vector<SpecIds>& ids, EdgeBuilder& edges, CostTables& t) {
  const IrNode& out = g.nodes.back();
  std::vector<std::string> roles, targets;
  if (const auto* ex = out.extra.find("roles"))
    for (const auto& x : ex->as_array()) roles.push_back(x.as_string());
  if (const auto* ex = out.extra.find("targets"))
    for (const auto& x : ex->as_array()) targets.push_back(x.as_string());
  const auto& out_args = out.args.as_array().at(0).as_array("output.args[0]");
  const PlacementSpec rep(g.mesh.ndim(), Placement::replicate());
  auto specs_of = [&](int node) {
    std::vector<PlacementSpec> specs;
    for (const auto& st : strat[node].strategies) specs.push_back(st.outputs.at(0));
    return specs;
  };
  t.sink_of_output.assign(out_args.size(), -1);
  const int out_node = static_cast<int>(g.nodes.size()) - 1;
  std::vector<int> sinks_reading(g.nodes.size(), 0);
  for (const auto& a : out_args) {
    std::vector<TensorRef> refs;
    collect_tensor_refs(a, refs);
    if (!refs.empty()) sinks_reading[static_cast<size_t>(refs[0].node)] += 1;
  }
  for (size_t j = 0; j < out_args.size(); ++j) {
    if (!is_tensor_ref(out_args[j])) continue;
    std::vector<TensorRef> refs;
    collect_tensor_refs(out_args[j], refs);
    OutputSink s;
    s.ref = refs.at(0);
    s.role = j < roles.size() ? roles[j] : "output";
    s.target = j < targets.size() ? targets[j] : "";
    const auto find = [](const std::map<std::string, int>& m, const std::string& k) {
      auto it = m.find(k);
      return it == m.end() ? -1 : it->second;
    };
    if (policy.train && (s.role == "grad" || s.role == "mutation")) {
      s.coupled_param = find(ph.state, s.target);
    } else if (policy.train && s.role == "output") {
      s.coupled_param = find(ph.tangent, s.target);
      if (s.coupled_param < 0 && !policy.replicate_outputs && !policy.replicated_outputs.count(s.target))
        s.specs = all_rs_specs(g.meta(s.ref).shape, g.mesh);
    } else if (s.role == "input_grad") {
      const int in = find(ph.inputs, s.target);
      if (in >= 0) s.specs.push_back(strat[in].strategies.at(t.problem.nodes[in].pinned).outputs.at(0));
    }
    if (s.coupled_param >= 0) s.specs = specs_of(s.coupled_param);
    if (s.specs.empty()) s.specs.push_back(rep);
    s.problem_node = static_cast<int>(t.problem.nodes.size());
    solver::Node pn;
    pn.start = static_cast<int64_t>(g.nodes.size()) - 1;
    pn.end = static_cast<int64_t>(g.nodes.size());
    pn.strategies.resize(s.specs.size());
    std::vector<int> dst_ids;
    for (const auto& sp : s.specs) dst_ids.push_back(t.redist.spec_id(sp));
    if (reduced_when_made(g, policy, s, sinks_reading, out_node)) {
      // The runtime reduces a gradient as soon as backward makes it (bucketing.py, the
      // overlap schedule): its unreduced value (a Partial is the parameter's full size) is
      // freed there and the reduced one, in the parameter's spec, is held to the end.
      const int p = s.ref.node;
      t.problem.nodes[static_cast<size_t>(p)].end = p + 1;
      pn.start = p + 1;
      const int meta = t.redist.meta_id(g.meta(s.ref));
      for (size_t b = 0; b < s.specs.size(); ++b) pn.strategies[b].usage = t.redist.shard_bytes(meta, dst_ids[b]);
    }
    t.problem.nodes.push_back(pn);
    // Under torch's tensor-parallel plan a gradient is made in its parameter's placement, as
    // ColwiseParallel / RowwiseParallel leave them: a replicated norm weight's gradient is
    // not computed in pieces and gathered (the bundled llama did, 0.13 M elements a step).
    // build_cost_tables keeps the edges into the gradient's tail (its transposes, casts) local too.
    const InputEdgeRule rule = policy.like == "tp" && s.role == "grad" ? InputEdgeRule::AsProduced : InputEdgeRule::Any;
    edges.add(s.ref.node, s.problem_node,
              edges.matrices().get(t.redist.meta_id(g.meta(s.ref), sink_bucket(t, s)), column(ids[s.ref.node].out, s.ref.output), dst_ids,
                                   rule));
    if (s.coupled_param >= 0) {  // the sink's choice k is the coupled placeholder's choice k
      solver::Coupling c;
      c.u = s.coupled_param;
      c.v = s.problem_node;
      for (size_t b = 0; b < s.specs.size(); ++b) c.map.push_back(static_cast<int>(b));
      t.problem.couplings.push_back(std::move(c));
    }
    t.sink_of_output[j] = static_cast<int>(t.sinks.size());
    t.sinks.push_back(std::move(s));
  }
}

}  // namespace

namespace {
// A spec as one integer, a byte per mesh dim (R 1, S(d) 2 + 4d, P(op) 3 + 4op):
// interning millions of specs through strings was a tenth of the table build
// on 3-D meshes. False for specs that do not fit (more than 8 mesh dims, a
// tensor dim past 63); those go through their string.
bool packed_spec(const PlacementSpec& s, uint64_t* key) {
  if (s.size() > 8) return false;
  uint64_t k = 0;
  for (const Placement& p : s) {
    const int64_t code = p.is_replicate() ? 1
                         : p.is_shard()   ? 2 + 4 * static_cast<int64_t>(p.dim)
                                          : 3 + 4 * static_cast<int64_t>(p.reduce);
    if (code <= 0 || code > 255) return false;  // a negative or too large dim
    k = (k << 8) | static_cast<uint64_t>(code);
  }
  *key = k;
  return true;
}
}  // namespace

int RedistCostCache::spec_id(const PlacementSpec& s) {
  const int next = static_cast<int>(specs_.size());
  uint64_t key = 0;
  int id;
  bool fresh;
  if (packed_spec(s, &key)) {
    const auto r = packed_ids_.emplace(key, next);
    id = r.first->second, fresh = r.second;
  } else {
    const auto r = spec_ids_.emplace(to_string(s), next);
    id = r.first->second, fresh = r.second;
  }
  if (fresh) specs_.push_back(s);
  return id;
}

int RedistCostCache::meta_id(const TensorMeta& t, BucketShare bucket) {
  std::string key;
  if (bucket.bytes > 0) key = (bucket.gathers_only ? "g" : "b") + std::to_string(bucket.bytes) + ":";
  key += to_string(t.dtype);
  for (auto d : t.shape) key += "," + std::to_string(d);
  const int id = intern(meta_ids_, key);
  if (id == static_cast<int>(metas_.size())) {
    metas_.push_back(t);
    bucket_.push_back(bucket);
  }
  return id;
}

RedistCostCache::MetaTable& RedistCostCache::table(int meta) {
  if (tables_.size() <= static_cast<size_t>(meta)) tables_.resize(static_cast<size_t>(meta) + 1);
  return tables_[static_cast<size_t>(meta)];
}

size_t RedistCostCache::local(MetaTable& t, int spec) {
  if (t.local.size() <= static_cast<size_t>(spec)) t.local.resize(static_cast<size_t>(spec) + 1, -1);
  int& l = t.local[static_cast<size_t>(spec)];
  if (l < 0) {
    l = static_cast<int>(t.rows.size());
    t.rows.emplace_back();
    t.bytes.push_back(-1);
  }
  return static_cast<size_t>(l);
}

solver::Cost RedistCostCache::get(int meta, int src, int dst) {
  if (src == dst) return 0;
  MetaTable& t = table(meta);
  const size_t ls = local(t, src), ld = local(t, dst);
  std::vector<solver::Cost>& row = t.rows[ls];
  if (row.size() <= ld) row.resize(t.rows.size(), -1);
  if (row[ld] < 0) {
    const solver::Cost c = price(meta, t, src, dst);  // may add rows: `row` is not used after this
    t.rows[ls][ld] = c;
    ++computed_;
  }
  return t.rows[ls][ld];
}

namespace {
// Whether every Shard dim of `s` is a non-negative dim below `ndim` (the specs
// the strategies produce); anything else takes CostModel's checked path.
bool plain_dims(const PlacementSpec& s, int64_t ndim) {
  for (const Placement& p : s)
    if (p.is_shard() && (p.dim < 0 || p.dim >= ndim)) return false;
  return true;
}
}  // namespace

const RedistCostCache::PairPlan& RedistCostCache::pair_plan(int src, int dst) {
  const uint64_t key = (static_cast<uint64_t>(src) << 32) | static_cast<uint32_t>(dst);
  const auto found = pair_ids_.find(key);
  if (found != pair_ids_.end()) return pairs_[static_cast<size_t>(found->second)];
  PairPlan plan;
  const PlacementSpec s = specs_[static_cast<size_t>(src)], d = specs_[static_cast<size_t>(dst)];
  if (!can_redistribute(s, d)) {
    plan.refused = true;
  } else {
    int64_t ndim = 0;  // any shape of the specs' rank: the steps do not depend on sizes
    for (const auto* spec : {&s, &d})
      for (const Placement& p : *spec)
        if (p.is_shard()) ndim = std::max<int64_t>(ndim, p.dim + 1);
    for (const CollectiveStep& step :
         plan_redistribute(std::vector<int64_t>(static_cast<size_t>(ndim), 1), mesh_, s, d).steps)
      plan.steps.push_back({step.kind, step.mesh_dim, step.reduce, spec_id(step.before), spec_id(step.after),
                            step.kind == CollectiveKind::AllGather ? step.src_dim : step.dst_dim});
  }
  pair_ids_.emplace(key, static_cast<int>(pairs_.size()));
  pairs_.push_back(std::move(plan));
  return pairs_.back();
}

int64_t RedistCostCache::local_bytes(int meta, MetaTable& t, int spec) {
  const size_t l = local(t, spec);
  if (t.bytes[l] < 0) t.bytes[l] = cm_.local_bytes(metas_[static_cast<size_t>(meta)], mesh_, specs_[static_cast<size_t>(spec)]);
  return t.bytes[l];
}

// Sums the pair plan's steps with the same formula and order as
// CostModel::redistribute_seconds, so both give the same value to the bit.
solver::Cost RedistCostCache::price(int meta, MetaTable& t, int src, int dst) {
  const TensorMeta& tm = metas_[static_cast<size_t>(meta)];
  if (!plain_dims(specs_[static_cast<size_t>(src)], tm.ndim()) || !plain_dims(specs_[static_cast<size_t>(dst)], tm.ndim()))
    return to_cost(cm_.redistribute_seconds(tm, mesh_, specs_[static_cast<size_t>(src)], specs_[static_cast<size_t>(dst)]));
  const PairPlan& plan = pair_plan(src, dst);
  if (plan.refused) return solver::kInfiniteCost;
  const BucketShare bucket = bucket_[static_cast<size_t>(meta)];
  auto run_seconds = [&](const StepRun& run) {
    const PairStep& st = plan.steps[run.begin];
    const double before = static_cast<double>(local_bytes(meta, t, st.before));
    const double after = static_cast<double>(local_bytes(meta, t, plan.steps[run.end - 1].after));
    double seconds = cm_.run_seconds(st.kind, run.lo_dim, run.hi_dim, st.reduce, before, after, mesh_, tm.dtype);
    const bool member = bucket.bytes > 0 && is_communicating(st.kind) &&
                        (!bucket.gathers_only || st.kind == CollectiveKind::AllGather);
    if (member) {
      // One collective of the bucket carries this tensor: the bucket pays the fixed cost
      // (a byte's worth of collective: its latency) once, each member its share by bytes.
      const double bucket_bytes = static_cast<double>(bucket.bytes);
      const double fixed = cm_.run_seconds(st.kind, run.lo_dim, run.hi_dim, st.reduce, 1, 1, mesh_, tm.dtype);
      const double share = std::min(1.0, std::max(before, after) / bucket_bytes);
      seconds -= (1 - share) * std::min(fixed, seconds);
      // A tensor smaller than a bucket shares one and is copied into its flat buffer (one
      // that fills a bucket is reduced alone, in place): unpriced, the copies of llama's
      // gradients were 8-10 ms a step on the 4-rank CPU mesh (docs/benchmarks_log.md).
      // A gathered member is its column of every rank's row: one more copy out, of its
      // gathered bytes (bucketing.py's _merge). A bucket counts a member by the larger of
      // its input and output, as the runtime does.
      if (share < 1) {
        seconds += cm_.bucket_copy_seconds(before);
        if (st.kind == CollectiveKind::AllGather) seconds += cm_.bucket_copy_seconds(after);
      }
    }
    return seconds;
  };
  double total = 0;
  if (plan.steps.size() < 2) {  // most pairs: nothing to merge, nothing to allocate
    for (size_t i = 0; i < plan.steps.size(); ++i)
      total += run_seconds({i, i + 1, plan.steps[i].mesh_dim, plan.steps[i].mesh_dim});
    return to_cost(total);
  }
  // Steps the runtime merges into one collective are priced as that one (merged_step_runs).
  std::vector<StepKey> keys;
  keys.reserve(plan.steps.size());
  for (const PairStep& st : plan.steps)
    keys.push_back(step_key(st.kind, st.mesh_dim, st.tensor_dim, st.reduce, specs_[static_cast<size_t>(st.before)],
                            specs_[static_cast<size_t>(st.after)], tm.shape, mesh_));
  for (const StepRun& run : merged_step_runs(keys, mesh_)) total += run_seconds(run);
  return to_cost(total);
}

const std::vector<std::string>& like_plans() {
  static const std::vector<std::string> plans = {"ddp", "fsdp2", "tp"};
  return plans;
}

bool known_like(const std::string& like) {
  const auto& plans = like_plans();
  return like.empty() || std::find(plans.begin(), plans.end(), like) != plans.end();
}

namespace {
// Under a torch plan (BoundaryPolicy::like) the edge from `r` may not communicate. Under a
// data-parallel plan: it carries an activation (not a parameter or buffer) of more than one
// element. Under "tp": it carries a parameter or buffer as read (state_read_roots), so each
// is used where it is kept.
bool local_under_like(const BoundaryPolicy& policy, const Graph& g, const std::vector<int>& state_roots,
                      const TensorRef& r) {
  if (policy.like.empty()) return false;
  if (policy.like == "tp") return state_roots[static_cast<size_t>(r.node)] >= 0;
  return !is_state(g.nodes[r.node]) && g.meta(r).numel() > 1;
}
}  // namespace

// The nodes whose value only becomes parameter gradients: single-input ops (views, casts,
// transposes) all of whose readers are such nodes or gradient outputs. The runtime buckets
// the reductions of gradients wherever on that chain they happen (bucketing.py buckets
// every reduction of a kind, dtype and group whose inputs are ready one after another):
// a weight gradient reduced in bf16 before its fp32 upcast is bucketed as one reduced
// after it, so both are priced alike.
static std::vector<char> gradient_tails(const Graph& g) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<char> tail(static_cast<size_t>(n), 0), grad_out(static_cast<size_t>(n), 0), other_out(static_cast<size_t>(n), 0);
  const IrNode& out = g.nodes.back();
  std::vector<std::string> roles;
  if (const auto* ex = out.extra.find("roles"))
    for (const auto& x : ex->as_array()) roles.push_back(x.as_string());
  const auto& out_args = out.args.as_array().at(0).as_array("output.args[0]");
  for (size_t j = 0; j < out_args.size(); ++j) {
    std::vector<TensorRef> refs;
    collect_tensor_refs(out_args[j], refs);
    const bool grad = j < roles.size() && roles[j] == "grad";
    for (const TensorRef& r : refs) (grad ? grad_out : other_out)[static_cast<size_t>(r.node)] = 1;
  }
  for (int v = n - 2; v >= 0; --v) {
    const IrNode& node = g.nodes[static_cast<size_t>(v)];
    if (node.op == "placeholder" || node.tensor_inputs.size() != 1 || node.users.empty()) continue;
    bool only_gradients = true;
    for (int u : node.users)
      only_gradients = only_gradients && (u == n - 1 ? grad_out[static_cast<size_t>(v)] && !other_out[static_cast<size_t>(v)]
                                                     : tail[static_cast<size_t>(u)] != 0);
    tail[static_cast<size_t>(v)] = only_gradients ? 1 : 0;
  }
  return tail;
}

BucketShare input_bucket(const Graph& g, const CostTables& t, int v, const TensorRef& r) {
  if (t.bucket_bytes <= 0) return {};
  // A reduction into a parameter's gradient is bucketed with the others (gradient_tails);
  // a one-element value (a loss, its count, an auxiliary loss) is moved once per spec and
  // its reductions travel in one bucket with the others ready with it (_spmd.py's small
  // moves, bucketing.py): each reader pays a share of that collective.
  if (t.bucketed_inputs.at(static_cast<size_t>(v)) != 0 || g.meta(r).numel() == 1) return {t.bucket_bytes, false};
  // A parameter's gather travels in its unit's bucket (gather_units.h).
  const int64_t unit = t.gather_buckets.at(static_cast<size_t>(r.node));
  if (unit > 0) return {unit, true};
  return {};
}

BucketShare sink_bucket(const CostTables& t, const OutputSink& s) {
  return s.bucketed() && t.bucket_bytes > 0 ? BucketShare{t.bucket_bytes, false} : BucketShare{};
}

void build_cost_tables(const Graph& g, const std::vector<NodeStrategies>& strat, const CostModel& cm,
                       const BoundaryPolicy& policy, std::optional<int64_t> memory_limit, bool materialize_edges,
                       CostTables& t) {
  if (!known_like(policy.like))
    throw InvalidArgument("like: expected '', 'ddp', 'fsdp2' or 'tp', got '" + policy.like + "'");
  t.bucket_bytes = policy.bucket_bytes;
  t.bucketed_inputs = policy.train ? gradient_tails(g) : std::vector<char>(g.nodes.size(), 0);
  t.gather_buckets = gather_bucket_bytes(g, policy.bucket_bytes);
  const int n = static_cast<int>(g.nodes.size());
  t.problem.name = "plan";
  std::vector<SpecIds> ids(n);
  for (int i = 0; i + 1 < n; ++i) {
    if (strat[i].same_as >= 0) {  // a copy of an earlier node's strategies: its ids too
      ids[i] = ids[static_cast<size_t>(strat[i].same_as)];
      continue;
    }
    for (const auto& st : strat[i].strategies) {
      ids[i].in.emplace_back();
      for (const auto& sp : st.inputs) ids[i].in.back().push_back(t.redist.spec_id(sp));
      ids[i].out.emplace_back();
      for (const auto& sp : st.outputs) ids[i].out.back().push_back(t.redist.spec_id(sp));
    }
  }
  solver::trace("tables: spec ids");
  add_nodes(g, strat, ids, cm, policy, t.redist, t.problem);
  const Placeholders placeholders = pin_placeholders(g, strat, policy, t.problem);
  solver::trace("tables: node costs");

  // Edges: redistribution from each producer's output spec to each consumer's input spec.
  EdgeBuilder edges(t, materialize_edges);
  const bool under_tp = policy.like == "tp";
  const std::vector<int> state_roots = under_tp ? state_read_roots(g) : std::vector<int>();
  for (int v = 0; v + 1 < n; ++v) {
    const IrNode& node = g.nodes[v];
    const InputEdgeRule rule = input_edge_rule(node);
    for (size_t k = 0; k < node.tensor_inputs.size(); ++k) {
      const TensorRef& r = node.tensor_inputs[k];
      const auto src = column(ids[r.node].out, r.output), dst = column(ids[v].in, k);
      // Under "tp" no gradient moves on its way out either (add_sinks): a node whose value
      // only becomes a parameter's gradient (its transpose, a cast) reads it where it was made.
      const bool gradient_under_tp = under_tp && t.bucketed_inputs[static_cast<size_t>(v)] != 0;
      const InputEdgeRule edge_rule =
          local_under_like(policy, g, state_roots, r) || gradient_under_tp ? InputEdgeRule::AsProduced : rule;
      edges.add(r.node, v, edges.matrices().get(t.redist.meta_id(g.meta(r), input_bucket(g, t, v, r)), src, dst, edge_rule));
    }
  }
  solver::trace("tables: edges (%lld computed redistribution costs)", (long long)t.redist.size());
  add_sinks(g, strat, policy, placeholders, ids, edges, t);
  // Never the solver's choice under `like` (torch's plans keep every value); a fixed
  // policy there prices torch's plan with its activation checkpointing.
  if (policy.recompute && policy.train && (policy.like.empty() || policy.recompute_only) && materialize_edges) {
    std::vector<int> candidates = recompute_candidates(g, strat);
    if (policy.recompute_only) {  // a fixed policy: the named candidates are recomputed, the rest kept
      std::vector<int> named;
      for (int a : candidates)
        if (policy.recompute_only->count(g.nodes[static_cast<size_t>(a)].name)) named.push_back(a);
      candidates = std::move(named);
    } else {
      candidates = cut_long_chains(g, strat, candidates);
    }
    add_recompute_choices(g, strat, candidates, t, policy.recompute_only.has_value());
    solver::trace("tables: %zu values backward may recompute", t.recompute.size());
  }
  if (memory_limit) t.problem.usage_limit = *memory_limit;
}

}  // namespace tlm
