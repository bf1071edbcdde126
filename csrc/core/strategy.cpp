// The strategy engine: op registry lookup, placeholder / fixed / fallback
// nodes, and the combinator that expands single-mesh-dim rules to the whole
// mesh. Per-op knowledge lives in csrc/core/strategies/*.cpp.
#include "core/strategy.h"

#include "core/sharding_constraint.h"

#include <algorithm>
#include <unordered_map>

#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"
#include "core/strategy_signature.h"

namespace tlm {

using strategies::DimRows;
using strategies::Rule;
using strategies::RuleCtx;

namespace {

const strategies::Registry& registry() {
  static const strategies::Registry reg = [] {
    strategies::Registry r;
    strategies::register_pointwise(r);
    strategies::register_matmul(r);
    strategies::register_reduction(r);
    strategies::register_view(r);
    strategies::register_factory(r);
    strategies::register_norm(r);
    strategies::register_softmax(r);
    strategies::register_attention(r);
    strategies::register_embedding(r);
    strategies::register_loss(r);
    strategies::register_conv(r);
    strategies::register_indexing(r);
    strategies::register_advanced_indexing(r);
    strategies::register_random(r);
    strategies::register_fft(r);
    return r;
  }();
  return reg;
}

// Advances `idx` like an odometer (last position fastest), position m ranging
// over [0, size(m)); false once every combination was visited (or none exist).
template <typename SizeOf>
bool next_combination(std::vector<size_t>& idx, SizeOf size_of) {
  for (size_t m = idx.size(); m > 0;) {
    --m;
    if (++idx[m] < size_of(m)) return true;
    idx[m] = 0;
  }
  return false;
}

// P(max)/P(min) reduce by an order, and complex numbers have none: such rows are
// dropped for complex tensors whatever the rule lists.
bool orders_partials(const RuleCtx& c, const Placement* row, int width) {
  for (int t = 0; t < width; ++t) {
    if (!row[t].is_partial() || row[t].reduce == ReduceOp::Sum || row[t].reduce == ReduceOp::Avg) continue;
    const DType dt = t < c.num_inputs() ? c.in(t).dtype : c.out(t - c.num_inputs()).dtype;
    if (is_complex(dt)) return false;
  }
  return true;
}

bool row_is_replicate(const Placement* row, int width) {
  for (int i = 0; i < width; ++i)
    if (!row[i].is_replicate()) return false;
  return true;
}

bool rows_equal(const Placement* a, const Placement* b, int width) {
  for (int i = 0; i < width; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

bool partial_kinds_commute(const PlacementSpec& sp) {
  bool linear = false, other = false;
  ReduceOp first = ReduceOp::Sum;
  for (const auto& p : sp) {
    if (!p.is_partial()) continue;
    if (p.reduce == ReduceOp::Sum || p.reduce == ReduceOp::Avg) {
      linear = true;
    } else if (!other) {
      other = true;
      first = p.reduce;
    } else if (p.reduce != first) {
      return false;
    }
  }
  return !(linear && other);
}

// Shapes of the row's tensors: inputs then outputs.
std::vector<const std::vector<int64_t>*> row_shapes(const RuleCtx& c) {
  std::vector<const std::vector<int64_t>*> out;
  for (int k = 0; k < c.num_inputs(); ++k) out.push_back(&c.in(k).shape);
  for (int k = 0; k < c.num_outputs(); ++k) out.push_back(&c.out(k).shape);
  return out;
}

// Expands single-mesh-dim rows to every mesh dim and keeps the valid combinations.
// Bit of a Partial kind in a reachability mask.
uint8_t kind_bit(ReduceOp op) { return static_cast<uint8_t>(1u << static_cast<unsigned>(op)); }

// Whether `raw` holds `row` (width placements).
bool holds_row(const DimRows& raw, const Placement* row, int width) {
  for (size_t i = 0; i < raw.size(); ++i)
    if (rows_equal(raw.row(i), row, width)) return true;
  return false;
}

// `input_kinds`: per tensor input, the Partial kinds its producer can emit
// (nullptr: any). A row asking another Partial kind of an input needs a
// Replicate -> Partial conversion upstream, and is dropped where another row
// does as well:
// - where the row is Partial only because of such inputs (mm(P, R) -> P), the
//   row with them and its Partial outputs replicated (mm(R, R) -> R);
// - where another input is a Partial its producer makes (add(P, bias -> P)),
//   the row that takes that input reduced (the same collective, before the op).
// What is left is a Partial the op makes itself from sharded operands: addmm's
// bias with a product over a sharded contraction, torch's row-parallel
// nn.Linear. No row replaces it: it is kept, and the conversion is priced as a
// redistribution (a local division by the mesh size). Without it a biased
// Linear could not be row-parallel: a 4-rank MLP of 1024 x 4096 Linears at 16
// rows planned 3.7x dearer, moving weights by all-to-all instead.
std::vector<OpStrategy> combine(const RuleCtx& c, const DimRows& raw, const strategies::ValidFn& valid,
                                const std::vector<uint8_t>* input_kinds) {
  const Mesh& mesh = c.mesh();
  const int width = raw.width();
  const int n_in = c.num_inputs();
  const auto shapes = row_shapes(c);

  // Distinct rows, first occurrence order; the all-replicate row is always valid.
  std::vector<const Placement*> rows;
  std::vector<Placement> all_r(static_cast<size_t>(width), Placement::replicate());
  std::vector<Placement> replaced(static_cast<size_t>(width));
  for (size_t i = 0; i < raw.size(); ++i) {
    const Placement* r = raw.row(i);
    if (!orders_partials(c, r, width)) continue;
    if (input_kinds != nullptr) {
      bool reachable = true, partial_made_upstream = false;
      for (int t = 0; t < width; ++t) {
        const bool partial_in = t < n_in && r[t].is_partial();
        const bool unreachable = partial_in && ((*input_kinds)[t] & kind_bit(r[t].reduce)) == 0;
        reachable = reachable && !unreachable;
        partial_made_upstream = partial_made_upstream || (partial_in && !unreachable);
        replaced[static_cast<size_t>(t)] = unreachable || (t >= n_in && r[t].is_partial()) ? Placement::replicate() : r[t];
      }
      if (!reachable && (partial_made_upstream || row_is_replicate(replaced.data(), width) ||
                         holds_row(raw, replaced.data(), width)))
        continue;
    }
    bool dup = false;
    for (const Placement* q : rows)
      if (rows_equal(q, r, width)) { dup = true; break; }
    if (!dup) rows.push_back(r);
  }
  bool has_r = false;
  for (const Placement* q : rows) has_r = has_r || row_is_replicate(q, width);
  if (!has_r) rows.insert(rows.begin(), all_r.data());

  // Rows usable on each mesh dim: on a size-1 mesh dim every placement is
  // equivalent to Replicate, so only the replicate row is kept (dominance).
  // A row that shards a dim smaller than that mesh dim is dropped early.
  const size_t k = mesh.ndim();
  std::vector<std::vector<const Placement*>> per_dim(k);
  for (size_t m = 0; m < k; ++m) {
    for (const Placement* r : rows) {
      if (mesh.shape[m] == 1) {
        if (row_is_replicate(r, width)) per_dim[m].push_back(r);
        continue;
      }
      bool ok = true;
      for (int t = 0; t < width && ok; ++t)
        if (r[t].is_shard()) {
          const auto& sh = *shapes[t];
          if (r[t].dim < 0 || r[t].dim >= static_cast<int>(sh.size()))
            // Shapes that contradict each other (hand-written or corrupt IR): the rule
            // derived a dim from one operand that another does not have.
            c.fail("the sharding rule shards dim " + std::to_string(r[t].dim) + " of a rank-" +
                   std::to_string(sh.size()) + " tensor: the node's tensor shapes do not fit its op");
          ok = sh[r[t].dim] >= mesh.shape[m];
        }
      if (ok) per_dim[m].push_back(r);
    }
  }

  std::vector<OpStrategy> out;
  std::vector<size_t> idx(k, 0);
  OpStrategy cand;
  cand.inputs.assign(static_cast<size_t>(n_in), PlacementSpec(k));
  cand.outputs.assign(static_cast<size_t>(width - n_in), PlacementSpec(k));
  std::vector<int64_t> shards;  // scratch: shards per tensor dim
  while (true) {
    for (size_t m = 0; m < k; ++m) {
      const Placement* r = per_dim[m][idx[m]];
      for (int t = 0; t < width; ++t) (t < n_in ? cand.inputs[t] : cand.outputs[t - n_in])[m] = r[t];
    }
    // Nested sharding: every sharded dim must hold at least as many elements
    // as it has shards (torch.distributed.tensor's is_tensor_shardable).
    bool ok = true;
    if (k > 1) {
      for (int t = 0; t < width && ok; ++t) {
        const PlacementSpec& sp = t < n_in ? cand.inputs[t] : cand.outputs[t - n_in];
        const auto& sh = *shapes[t];
        shards.assign(sh.size(), 1);
        for (size_t m = 0; m < k; ++m)
          if (sp[m].is_shard()) shards[sp[m].dim] *= mesh.shape[m];
        for (size_t d = 0; d < sh.size() && ok; ++d) ok = shards[d] <= sh[d] || shards[d] == 1;
      }
    }
    // Partials of different kinds on one tensor must commute: sum and avg do,
    // max or min do not mix with anything else.
    if (ok && k > 1) {
      for (int t = 0; t < width && ok; ++t) {
        const PlacementSpec& sp = t < n_in ? cand.inputs[t] : cand.outputs[t - n_in];
        ok = partial_kinds_commute(sp);
      }
    }
    if (ok && valid) ok = valid(c, cand);
    if (ok) out.push_back(cand);
    if (!next_combination(idx, [&](size_t m) { return per_dim[m].size(); })) return out;
  }
}

OpStrategy replicate_all(const Graph& g, const IrNode& n) {
  OpStrategy s;
  const PlacementSpec r(g.mesh.ndim(), Placement::replicate());
  s.inputs.assign(n.tensor_inputs.size(), r);
  s.outputs.assign(n.outputs.size(), r);
  return s;
}

// Every Replicate / Shard spec of a tensor of this shape (no Partial: a
// placeholder holds real values).

const IrNode& node_at(const Graph& g, int id) {
  if (id < 0 || id >= static_cast<int>(g.nodes.size()))
    throw InvalidArgument("node index " + std::to_string(id) + " is outside the graph (0.." +
                          std::to_string(static_cast<int>(g.nodes.size()) - 1) + ")");
  return g.nodes[id];
}

// Whether validate_spec would accept `s` (without building its message).
bool spec_fits(const PlacementSpec& s, int64_t ndim, size_t mesh_ndim) {
  if (s.size() != mesh_ndim) return false;
  for (const Placement& p : s)
    if (p.is_shard() && (p.dim < -ndim || p.dim >= ndim)) return false;
  return true;
}

void check_strategy_fits(const Graph& g, const IrNode& n, const OpStrategy& s) {
  // The common case (every spec fits) builds no strings: the planner checks
  // hundreds of thousands of strategies on 3-D meshes.
  bool all_fit = s.inputs.size() == n.tensor_inputs.size() && s.outputs.size() == n.outputs.size();
  for (size_t k = 0; all_fit && k < s.inputs.size(); ++k)
    all_fit = spec_fits(s.inputs[k], g.meta(n.tensor_inputs[k]).ndim(), g.mesh.ndim());
  for (size_t k = 0; all_fit && k < s.outputs.size(); ++k)
    all_fit = spec_fits(s.outputs[k], n.outputs[k].ndim(), g.mesh.ndim());
  if (all_fit) return;
  if (s.inputs.size() != n.tensor_inputs.size() || s.outputs.size() != n.outputs.size())
    throw InvalidArgument("strategy for node '" + n.name + "' has " + std::to_string(s.inputs.size()) + " inputs and " +
                          std::to_string(s.outputs.size()) + " outputs; the node has " +
                          std::to_string(n.tensor_inputs.size()) + " tensor inputs and " +
                          std::to_string(n.outputs.size()) + " tensor outputs");
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    PlacementSpec sp = s.inputs[k];
    validate_spec(sp, g.meta(n.tensor_inputs[k]).ndim(), g.mesh.ndim(),
                  "node '" + n.name + "' input " + std::to_string(k));
  }
  for (size_t k = 0; k < s.outputs.size(); ++k) {
    PlacementSpec sp = s.outputs[k];
    validate_spec(sp, n.outputs[k].ndim(), g.mesh.ndim(), "node '" + n.name + "' output " + std::to_string(k));
  }
}

// Runs a rule on a node. Rules read arguments by schema position (`.at()`), so
// an IR node whose arguments do not fit its op's schema (hand-written or corrupt
// IR; the exporter never writes one) surfaces as std::out_of_range: reported as
// bad input naming the node, not as an internal error.
template <typename F>
auto run_rule(const IrNode& n, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::out_of_range& e) {
    throw InvalidArgument("node '" + n.name + "' (" + n.op + "): its arguments do not match the op's schema (" +
                          e.what() + ")");
  }
}

}  // namespace

std::vector<std::string> ops_with_rules() {
  std::vector<std::string> out;
  for (const auto& kv : registry()) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<PlacementSpec> all_rs_specs(const std::vector<int64_t>& shape, const Mesh& mesh) {
  const size_t k = mesh.ndim();
  std::vector<std::vector<Placement>> options(k);
  for (size_t m = 0; m < k; ++m) {
    options[m].push_back(Placement::replicate());
    if (mesh.shape[m] == 1) continue;
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] >= mesh.shape[m]) options[m].push_back(Placement::shard(static_cast<int>(d)));
  }
  std::vector<PlacementSpec> out;
  std::vector<size_t> idx(k, 0);
  PlacementSpec cur(k);
  std::vector<int64_t> shards;
  while (true) {
    for (size_t m = 0; m < k; ++m) cur[m] = options[m][idx[m]];
    shards.assign(shape.size(), 1);
    bool ok = true;
    for (size_t m = 0; m < k; ++m)
      if (cur[m].is_shard()) shards[cur[m].dim] *= mesh.shape[m];
    for (size_t d = 0; d < shape.size() && ok; ++d) ok = shards[d] == 1 || shards[d] <= shape[d];
    if (ok) out.push_back(cur);
    if (!next_combination(idx, [&](size_t m) { return options[m].size(); })) return out;
  }
}

static NodeStrategies enumerate_impl(const Graph& g, int id, const StrategyOptions& options,
                              const std::vector<uint8_t>* input_kinds) {
  const IrNode& n = node_at(g, id);
  NodeStrategies out;
  if (n.op == "output")
    throw InvalidArgument("node '" + n.name + "' is the graph's output node; the planner places it, not a rule");
  if (n.has_fixed) {
    out.family = n.op == kShardingConstraintOp ? "sharding_constraint" : "local_map";
    out.strategies.push_back(OpStrategy{n.fixed.inputs, n.fixed.outputs});
    return out;
  }
  if (n.op == "placeholder") {
    out.family = "placeholder";
    if (n.outputs.size() != 1)
      throw InvalidArgument("placeholder '" + n.name + "' has " + std::to_string(n.outputs.size()) +
                            " tensor outputs (expected 1)");
    for (auto& sp : all_rs_specs(n.outputs[0].shape, g.mesh)) out.strategies.push_back(OpStrategy{{}, {sp}});
    return out;
  }
  const auto& reg = registry();
  auto it = reg.find(n.op);
  if (it == reg.end()) {
    if (!options.fallback_replicate)
      throw NoStrategyError("no sharding strategy for op '" + n.op + "' at node '" + n.name +
                            "'; wrap the code that produces it in torch_localmap.local_map with explicit "
                            "placements, or enable the replicate fallback");
    out.family = "fallback";
    out.fell_back = true;
    out.strategies.push_back(replicate_all(g, n));
    return out;
  }
  const Rule& rule = it->second;
  RuleCtx c{g, id, n};
  DimRows rows(c.num_inputs() + c.num_outputs());
  out.family = rule.family;
  out.strategies = run_rule(n, [&] {
    rule.dims(c, rows);
    return combine(c, rows, rule.make_valid ? rule.make_valid(c) : rule.valid, input_kinds);
  });
  if (out.strategies.empty()) out.strategies.push_back(replicate_all(g, n));
  return out;
}

NodeStrategies enumerate_strategies(const Graph& g, int id, const StrategyOptions& options) {
  return enumerate_impl(g, id, options, nullptr);
}

std::vector<NodeStrategies> enumerate_graph_strategies(const Graph& g, const StrategyOptions& options) {
  std::vector<NodeStrategies> out(g.nodes.size());
  // Partial kinds each node's outputs can take, filled in node order (the IR
  // is topologically sorted), so consumers only see kinds that can reach them.
  std::vector<std::vector<uint8_t>> kinds(g.nodes.size());
  std::vector<uint8_t> in_kinds;
  // Repeated layers repeat their nodes' signatures: each is enumerated once.
  std::unordered_map<std::string, int> first_with;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const IrNode& n = g.nodes[i];
    if (n.op == "output") {
      out[i].family = "output";
      continue;
    }
    in_kinds.clear();
    for (const auto& r : n.tensor_inputs) in_kinds.push_back(kinds[r.node][r.output]);
    const std::string signature = strategy_signature(g, static_cast<int>(i), in_kinds);
    const auto seen = signature.empty() ? first_with.end() : first_with.find(signature);
    if (seen != first_with.end()) {
      out[i] = out[static_cast<size_t>(seen->second)];
      out[i].same_as = seen->second;
    } else {
      out[i] = enumerate_impl(g, static_cast<int>(i), options, &in_kinds);
      if (!signature.empty()) first_with.emplace(signature, static_cast<int>(i));
    }
    auto& k = kinds[i];
    k.assign(n.outputs.size(), 0);
    for (const auto& s : out[i].strategies)
      for (size_t o = 0; o < s.outputs.size(); ++o)
        for (const auto& p : s.outputs[o])
          if (p.is_partial()) k[o] |= kind_bit(p.reduce);
  }
  return out;
}

OpWork op_work(const Graph& g, int id, const OpStrategy& s) {
  const IrNode& n = node_at(g, id);
  if (n.op == "placeholder" || n.op == "output") return OpWork{};
  check_strategy_fits(g, n, s);
  // A local_map region: the exporter measured the work of its body on local shapes.
  if (const json::Value* w = n.has_fixed ? n.extra.find("work") : nullptr)
    return OpWork{w->at("flops", "region work").as_double("work.flops"),
                  w->at("bytes", "region work").as_double("work.bytes")};
  RuleCtx c{g, id, n};
  const auto& reg = registry();
  auto it = reg.find(n.op);
  if (it != reg.end() && it->second.work) return run_rule(n, [&] { return it->second.work(c, s); });
  return strategies::elementwise_work(c, s);
}

json::Value local_call_args(const Graph& g, int id, const OpStrategy& s, const std::vector<int64_t>& coord) {
  const IrNode& n = node_at(g, id);
  check_strategy_fits(g, n, s);
  if (coord.size() != g.mesh.ndim())
    throw InvalidArgument("mesh coordinate has " + std::to_string(coord.size()) + " entries; the mesh " +
                          g.mesh.to_string() + " has " + std::to_string(g.mesh.ndim()) + " dims");
  for (size_t m = 0; m < coord.size(); ++m)
    if (coord[m] < 0 || coord[m] >= g.mesh.shape[m])
      throw InvalidArgument("mesh coordinate " + std::to_string(coord[m]) + " at dim " + std::to_string(m) +
                            " is outside the mesh " + g.mesh.to_string());
  RuleCtx c{g, id, n};
  const auto& reg = registry();
  auto it = reg.find(n.op);
  if (it != reg.end() && it->second.call_args) return run_rule(n, [&] { return it->second.call_args(c, s, coord); });
  json::Value out = json::Value::Object{};
  out.set("args", n.args);
  out.set("kwargs", n.kwargs);
  return out;
}

}  // namespace tlm
