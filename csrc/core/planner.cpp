#include "planner.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "layout.h"
#include "solver/solver.h"

namespace tlm {

solver::Cost to_cost(double seconds) {
  if (!std::isfinite(seconds)) return solver::kInfiniteCost;
  double ps = std::round(seconds * 1e12);
  if (ps >= 9.0e18) return solver::kInfiniteCost;
  return static_cast<solver::Cost>(std::max(0.0, ps));
}

static solver::Cost add_cost(solver::Cost a, solver::Cost b) {
  if (a == solver::kInfiniteCost || b == solver::kInfiniteCost) return solver::kInfiniteCost;
  return a + b;
}

PlanOptions read_plan_options(const json::Value& v) {
  PlanOptions o;
  if (v.is_null()) return o;
  v.as_object("plan options");
  if (auto* x = v.find("mode")) {
    o.mode = x->as_string("options.mode");
    if (o.mode != "train" && o.mode != "compile")
      throw InvalidArgument("options.mode: expected 'train' or 'compile', got '" + o.mode + "'");
  }
  if (auto* x = v.find("device")) o.device = x->as_string("options.device");
  if (auto* x = v.find("calibration")) o.calibration_json = x->is_string() ? x->as_string() : x->dump();
  if (auto* x = v.find("fallback_replicate")) o.fallback_replicate = x->as_bool("options.fallback_replicate");
  if (auto* x = v.find("time_limit")) {
    o.time_limit_s = x->as_double("options.time_limit");
    if (!(o.time_limit_s > 0)) throw InvalidArgument("options.time_limit: expected a positive number of seconds");
  }
  if (auto* x = v.find("seed")) o.seed = static_cast<uint64_t>(x->as_int("options.seed"));
  if (auto* x = v.find("threads")) o.threads = static_cast<int>(x->as_int("options.threads"));
  if (auto* x = v.find("memory_limit"); x && !x->is_null()) {
    o.memory_limit_bytes = x->as_int("options.memory_limit");
    if (*o.memory_limit_bytes <= 0) throw InvalidArgument("options.memory_limit: expected a positive byte count");
  }
  if (auto* x = v.find("build_only")) o.build_only = x->as_bool("options.build_only");
  if (auto* x = v.find("fixed_params"))
    for (const auto& kv : x->as_object("options.fixed_params"))
      o.fixed_params[kv.first] = parse_spec(kv.second.as_string("options.fixed_params." + kv.first));
  return o;
}

namespace {

struct OutputSink {
  TensorRef ref;
  std::string role;    // "output" | "grad" | "input_grad"
  std::string target;  // parameter name for grads
  int problem_node = -1;
  std::vector<PlacementSpec> specs;  // candidate specs, one per sink strategy
  int coupled_param = -1;            // IR node of the parameter (grads)
};

// Specs and tensor metas are interned to small integers once, so the edge loops
// below touch no strings; redistribution costs repeat across layers and are
// computed once per (tensor meta, src spec, dst spec).
class Interner {
 public:
  int id(const std::string& key) {
    auto it = ids_.find(key);
    if (it != ids_.end()) return it->second;
    int next = static_cast<int>(ids_.size());
    ids_.emplace(key, next);
    return next;
  }

 private:
  std::unordered_map<std::string, int> ids_;
};

class RedistCostCache {
 public:
  RedistCostCache(const CostModel& cm, const Mesh& mesh) : cm_(cm), mesh_(mesh) {}

  int spec_id(const PlacementSpec& s) {
    int id = specs_.id(to_string(s));
    if (id == static_cast<int>(spec_values_.size())) spec_values_.push_back(s);
    return id;
  }
  int meta_id(const TensorMeta& t) {
    std::string key = to_string(t.dtype);
    for (auto d : t.shape) key += "," + std::to_string(d);
    int id = metas_.id(key);
    if (id == static_cast<int>(meta_values_.size())) meta_values_.push_back(t);
    return id;
  }
  solver::Cost get(int meta, int src, int dst) {
    if (src == dst) return 0;
    uint64_t key = (static_cast<uint64_t>(meta) << 42) | (static_cast<uint64_t>(src) << 21) | static_cast<uint64_t>(dst);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    solver::Cost c = to_cost(cm_.redistribute_seconds(meta_values_[meta], mesh_, spec_values_[src], spec_values_[dst]));
    cache_.emplace(key, c);
    return c;
  }
  size_t size() const { return cache_.size(); }
  solver::Cost get(const TensorMeta& t, const PlacementSpec& src, const PlacementSpec& dst) {
    return get(meta_id(t), spec_id(src), spec_id(dst));
  }

 private:
  const CostModel& cm_;
  const Mesh& mesh_;
  Interner specs_, metas_;
  std::vector<PlacementSpec> spec_values_;
  std::vector<TensorMeta> meta_values_;
  std::unordered_map<uint64_t, solver::Cost> cache_;
};

// Spec ids of every strategy's inputs and outputs, interned once per node.
struct SpecIds {
  std::vector<std::vector<int>> in, out;  // [strategy][k]
};

// The cost matrix of one (producer output -> consumer input) edge: costs are
// computed per unique (src, dst) spec pair and then spread by index.
std::vector<solver::Cost> edge_matrix(RedistCostCache& cache, int meta, const std::vector<int>& src_ids,
                                      const std::vector<int>& dst_ids, bool materialize = true) {
  std::vector<int> usrc, udst, src_pos(src_ids.size()), dst_pos(dst_ids.size());
  auto index_of = [](std::vector<int>& uniq, int id) {
    for (size_t i = 0; i < uniq.size(); ++i)
      if (uniq[i] == id) return static_cast<int>(i);
    uniq.push_back(id);
    return static_cast<int>(uniq.size() - 1);
  };
  for (size_t a = 0; a < src_ids.size(); ++a) src_pos[a] = index_of(usrc, src_ids[a]);
  for (size_t b = 0; b < dst_ids.size(); ++b) dst_pos[b] = index_of(udst, dst_ids[b]);
  std::vector<solver::Cost> pair(usrc.size() * udst.size());
  for (size_t a = 0; a < usrc.size(); ++a)
    for (size_t b = 0; b < udst.size(); ++b) pair[a * udst.size() + b] = cache.get(meta, usrc[a], udst[b]);
  if (!materialize) return {};
  std::vector<solver::Cost> m(src_ids.size() * dst_ids.size());
  for (size_t a = 0; a < src_ids.size(); ++a) {
    const solver::Cost* row = &pair[src_pos[a] * udst.size()];
    solver::Cost* out = &m[a * dst_ids.size()];
    for (size_t b = 0; b < dst_ids.size(); ++b) out[b] = row[dst_pos[b]];
  }
  return m;
}

int find_spec(const std::vector<OpStrategy>& strategies, const PlacementSpec& spec) {
  for (size_t i = 0; i < strategies.size(); ++i)
    if (!strategies[i].outputs.empty() && strategies[i].outputs[0] == spec) return static_cast<int>(i);
  return -1;
}

PlacementSpec replicated(const Mesh& mesh) { return PlacementSpec(mesh.ndim(), Placement::replicate()); }

json::Value spec_list(const std::vector<PlacementSpec>& specs) {
  json::Value::Array a;
  for (const auto& s : specs) a.emplace_back(to_string(s));
  return json::Value(std::move(a));
}

}  // namespace

json::Value plan_graph(const Graph& g, const PlanOptions& opt) {
  const Mesh& mesh = g.mesh;
  const int n = static_cast<int>(g.nodes.size());
  if (n == 0 || g.nodes.back().op != "output")
    throw InvalidArgument("graph: the last node must be the 'output' node");
  CostModel cm = make_cost_model(opt.device, opt.calibration_json);
  StrategyOptions sopt;
  sopt.fallback_replicate = opt.fallback_replicate;

  // 1. Strategies per node.
  // Graph-level enumeration drops rows needing a Partial kind no producer can emit.
  std::vector<NodeStrategies> strat = enumerate_graph_strategies(g, sopt);
  std::vector<std::string> fallback_ops;
  for (int i = 0; i + 1 < n; ++i) {
    if (strat[i].fell_back) {
      const std::string& op = g.nodes[i].op;
      if (std::find(fallback_ops.begin(), fallback_ops.end(), op) == fallback_ops.end()) fallback_ops.push_back(op);
    }
  }

  // 2. Last use of every node, for liveness intervals.
  std::vector<int> last_use(n);
  for (int i = 0; i < n; ++i) last_use[i] = i;
  for (int i = 0; i < n; ++i)
    for (const auto& r : g.nodes[i].tensor_inputs) last_use[r.node] = std::max(last_use[r.node], i);

  // 3. Problem nodes: one per IR node (the output node gets no strategies of its own).
  solver::Problem prob;
  prob.name = "plan";
  prob.nodes.resize(n - 1);
  std::map<std::string, int> param_node;
  const PlacementSpec rep = replicated(mesh);
  for (int i = 0; i + 1 < n; ++i) {
    const IrNode& node = g.nodes[i];
    auto& pn = prob.nodes[i];
    pn.start = i;
    pn.end = last_use[i] + 1;
    for (const auto& s : strat[i].strategies) {
      solver::Strategy ps;
      if (node.op != "placeholder") {
        OpWork w = op_work(g, i, s);
        DType dt = node.outputs.empty() ? DType::Float32 : node.outputs[0].dtype;
        ps.cost = to_cost(cm.compute_seconds(w, dt));
      }
      for (size_t k = 0; k < node.outputs.size(); ++k) ps.usage += cm.local_bytes(node.outputs[k], mesh, s.outputs[k]);
      pn.strategies.push_back(ps);
    }
    if (node.op != "placeholder") continue;
    std::string target = node.extra.find("target") ? node.extra.at("target").as_string() : node.name;
    bool free_param = opt.mode == "train" && node.role == "param";
    if (free_param) param_node[target] = i;
    auto fixed = opt.fixed_params.find(target);
    if (free_param && fixed != opt.fixed_params.end()) {
      PlacementSpec spec = fixed->second;
      validate_spec(spec, node.outputs.at(0).ndim(), mesh.ndim(), "parameter '" + target + "'");
      pn.pinned = find_spec(strat[i].strategies, spec);
      if (pn.pinned < 0)
        throw InvalidArgument("parameter '" + target + "': placement " + to_string(spec) +
                              " is not a valid placement for its shape on mesh " + mesh.to_string());
    } else if (!free_param) {
      pn.pinned = find_spec(strat[i].strategies, rep);
      if (pn.pinned < 0) throw std::runtime_error("placeholder '" + node.name + "' has no replicated strategy");
    }
  }
  for (const auto& kv : opt.fixed_params)
    if (!param_node.count(kv.first) && opt.mode == "train")
      throw InvalidArgument("fixed_params names '" + kv.first + "', which is not a parameter of the model");

  // 4. Edges: redistribution from each producer's output spec to each consumer's input spec.
  RedistCostCache rcache(cm, mesh);
  std::vector<SpecIds> ids(n);
  for (int i = 0; i + 1 < n; ++i)
    for (const auto& st : strat[i].strategies) {
      ids[i].in.emplace_back();
      for (const auto& sp : st.inputs) ids[i].in.back().push_back(rcache.spec_id(sp));
      ids[i].out.emplace_back();
      for (const auto& sp : st.outputs) ids[i].out.back().push_back(rcache.spec_id(sp));
    }
  std::map<std::pair<int, int>, size_t> edge_of;
  int64_t matrix_entries = 0;
  auto add_edge_costs = [&](int u, int v, std::vector<solver::Cost> m) {
    auto key = std::make_pair(u, v);
    if (opt.build_only) {  // count only: dense matrices on 3-D/4-D meshes take gigabytes
      if (!edge_of.count(key)) {
        edge_of[key] = edge_of.size();
        matrix_entries += static_cast<int64_t>(prob.nodes[u].strategies.size() * prob.nodes[v].strategies.size());
      }
      return;
    }
    auto it = edge_of.find(key);
    if (it == edge_of.end()) {
      solver::Edge e;
      e.u = u;
      e.v = v;
      e.costs = std::move(m);
      edge_of[key] = prob.edges.size();
      prob.edges.push_back(std::move(e));
    } else {  // several inputs from the same producer: one edge, summed costs
      auto& e = prob.edges[it->second];
      for (size_t a = 0; a < m.size(); ++a) e.costs[a] = add_cost(e.costs[a], m[a]);
    }
  };
  auto column = [](const std::vector<std::vector<int>>& rows, size_t k) {
    std::vector<int> c(rows.size());
    for (size_t a = 0; a < rows.size(); ++a) c[a] = rows[a][k];
    return c;
  };
  for (int v = 0; v + 1 < n; ++v) {
    const IrNode& node = g.nodes[v];
    for (size_t k = 0; k < node.tensor_inputs.size(); ++k) {
      const TensorRef& r = node.tensor_inputs[k];
      int meta = rcache.meta_id(g.meta(r));
      add_edge_costs(r.node, v, edge_matrix(rcache, meta, column(ids[r.node].out, r.output), column(ids[v].in, k),
                                            !opt.build_only));
    }
  }

  // 5. Output sinks: forward outputs leave replicated; gradients in their parameter's spec.
  const IrNode& out = g.nodes.back();
  std::vector<std::string> roles, targets;
  if (const auto* ex = out.extra.find("roles"))
    for (const auto& x : ex->as_array()) roles.push_back(x.as_string());
  if (const auto* ex = out.extra.find("targets"))
    for (const auto& x : ex->as_array()) targets.push_back(x.as_string());
  const auto& out_args = out.args.as_array().at(0).as_array("output.args[0]");
  std::vector<OutputSink> sinks;
  std::vector<int> sink_of_output(out_args.size(), -1);
  for (size_t j = 0; j < out_args.size(); ++j) {
    if (!is_tensor_ref(out_args[j])) continue;
    std::vector<TensorRef> refs;
    collect_tensor_refs(out_args[j], refs);
    OutputSink s;
    s.ref = refs.at(0);
    s.role = j < roles.size() ? roles[j] : "output";
    s.target = j < targets.size() ? targets[j] : "";
    if (s.role == "grad" && opt.mode == "train" && param_node.count(s.target)) {
      s.coupled_param = param_node[s.target];
      for (const auto& st : strat[s.coupled_param].strategies) s.specs.push_back(st.outputs.at(0));
    } else {
      s.specs.push_back(rep);
    }
    s.problem_node = static_cast<int>(prob.nodes.size());
    solver::Node pn;
    pn.start = n - 1;
    pn.end = n;
    pn.strategies.resize(s.specs.size());
    prob.nodes.push_back(pn);
    std::vector<int> dst_ids;
    for (const auto& sp : s.specs) dst_ids.push_back(rcache.spec_id(sp));
    add_edge_costs(s.ref.node, s.problem_node,
                   edge_matrix(rcache, rcache.meta_id(g.meta(s.ref)), column(ids[s.ref.node].out, s.ref.output), dst_ids,
                               !opt.build_only));
    if (s.coupled_param >= 0) {
      solver::Coupling c;
      c.u = s.coupled_param;
      c.v = s.problem_node;
      for (size_t b = 0; b < s.specs.size(); ++b) c.map.push_back(static_cast<int>(b));
      prob.couplings.push_back(std::move(c));
    }
    sink_of_output[j] = static_cast<int>(sinks.size());
    sinks.push_back(std::move(s));
  }
  if (opt.memory_limit_bytes) prob.usage_limit = *opt.memory_limit_bytes;
  if (opt.build_only) {
    int64_t strategies = 0;
    for (const auto& pn : prob.nodes) strategies += static_cast<int64_t>(pn.strategies.size());
    json::Value stats;
    stats.set("nodes", static_cast<int64_t>(prob.nodes.size()));
    stats.set("strategies", strategies);
    stats.set("edges", static_cast<int64_t>(edge_of.size()));
    stats.set("edge_matrix_entries", matrix_entries);
    stats.set("distinct_redistribution_costs", static_cast<int64_t>(rcache.size()));
    return stats;
  }

  // 6. Solve.
  solver::SolveOptions so;
  so.time_limit_s = opt.time_limit_s;
  so.seed = opt.seed;
  so.threads = opt.threads;
  solver::SolveResult res = solver::solve(prob, so);
  const auto& sol = res.solution;

  // 7. The plan.
  json::Value plan;
  plan.set("format_version", kPlanFormatVersion);
  json::Value jmesh;
  jmesh.set("shape", json::Value(mesh.shape));
  jmesh.set("dim_names", json::Value(mesh.dim_names));
  plan.set("mesh", jmesh);
  json::Value::Array jnodes;
  double compute_total = 0, comm_total = 0;
  for (int i = 0; i + 1 < n; ++i) {
    const OpStrategy& s = strat[i].strategies.at(sol[i]);
    json::Value jn;
    jn.set("name", g.nodes[i].name);
    jn.set("op", g.nodes[i].op);
    json::Value js;
    js.set("inputs", spec_list(s.inputs));
    js.set("outputs", spec_list(s.outputs));
    jn.set("strategy", js);
    double compute = static_cast<double>(prob.nodes[i].strategies[sol[i]].cost) * 1e-12;
    double comm = 0;
    for (size_t k = 0; k < g.nodes[i].tensor_inputs.size(); ++k) {
      const TensorRef& r = g.nodes[i].tensor_inputs[k];
      const auto& src = strat[r.node].strategies.at(sol[r.node]).outputs[r.output];
      comm += static_cast<double>(rcache.get(g.meta(r), src, s.inputs[k])) * 1e-12;
    }
    jn.set("compute_s", compute);
    jn.set("comm_s", comm);
    jn.set("family", strat[i].family);
    jn.set("num_strategies", static_cast<int64_t>(strat[i].strategies.size()));
    if (strat[i].fell_back) jn.set("fell_back", true);
    compute_total += compute;
    comm_total += comm;
    jnodes.push_back(std::move(jn));
  }
  // Output node: the spec each graph output leaves in, and what it costs to get there.
  json::Value jout;
  jout.set("name", out.name);
  jout.set("op", "output");
  json::Value::Array out_specs;
  double out_comm = 0;
  for (size_t j = 0; j < out_args.size(); ++j) {
    if (sink_of_output[j] < 0) { out_specs.emplace_back(nullptr); continue; }
    const auto& s = sinks[sink_of_output[j]];
    const PlacementSpec& dst = s.specs.at(sol[s.problem_node]);
    const auto& src = strat[s.ref.node].strategies.at(sol[s.ref.node]).outputs[s.ref.output];
    out_comm += static_cast<double>(rcache.get(g.meta(s.ref), src, dst)) * 1e-12;
    out_specs.emplace_back(to_string(dst));
  }
  json::Value jos;
  jos.set("inputs", json::Value(out_specs));
  jos.set("outputs", json::Value(json::Value::Array{}));
  jout.set("strategy", jos);
  jout.set("compute_s", 0.0);
  jout.set("comm_s", out_comm);
  comm_total += out_comm;
  jnodes.push_back(std::move(jout));
  plan.set("nodes", json::Value(std::move(jnodes)));

  json::Value summary;
  summary.set("estimated_step_s", compute_total + comm_total);
  summary.set("compute_s", compute_total);
  summary.set("comm_s", comm_total);
  solver::Evaluation ev = solver::evaluate(prob, sol);
  summary.set("peak_bytes", ev.peak_usage);
  json::Value js;
  js.set("cost", solver::to_string(res.cost));
  js.set("bound", res.bound);
  js.set("gap", res.gap);
  js.set("seconds", res.seconds);
  js.set("status", res.status);
  if (!res.milp_note.empty()) js.set("note", res.milp_note);
  summary.set("solver", js);
  summary.set("fallback_ops", json::Value(fallback_ops));
  json::Value counts;
  std::map<std::string, std::pair<int64_t, int64_t>> fam;
  for (int i = 0; i + 1 < n; ++i) {
    auto& f = fam[strat[i].family.empty() ? std::string("other") : strat[i].family];
    f.first += 1;
    f.second += static_cast<int64_t>(strat[i].strategies.size());
  }
  for (const auto& kv : fam) {
    json::Value c;
    c.set("nodes", kv.second.first);
    c.set("strategies", kv.second.second);
    counts.set(kv.first, c);
  }
  summary.set("strategy_counts", counts);
  summary.set("device", opt.device);
  summary.set("mode", opt.mode);
  plan.set("summary", summary);
  return plan;
}

OpWork graph_work(const Graph& g) {
  OpWork total;
  StrategyOptions sopt;  // replicate fallback: any op is priced, unknown ones as elementwise
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    const IrNode& n = g.nodes[i];
    if (n.op == "placeholder" || n.op == "output") continue;
    NodeStrategies st = enumerate_strategies(g, i, sopt);
    OpWork w = op_work(g, i, st.strategies.at(0));
    total.flops += w.flops;
    total.bytes += w.bytes;
  }
  return total;
}

json::Value rank_call_args(const Graph& g, const json::Value& plan, const std::vector<int64_t>& coord) {
  const auto& nodes = plan.at("nodes", "plan").as_array("plan.nodes");
  if (nodes.size() != g.nodes.size())
    throw InvalidArgument("plan has " + std::to_string(nodes.size()) + " nodes but the graph has " +
                          std::to_string(g.nodes.size()) + " (plan and graph do not match)");
  if (coord.size() != g.mesh.ndim())
    throw InvalidArgument("mesh coordinate has " + std::to_string(coord.size()) + " dims, the mesh " +
                          std::to_string(g.mesh.ndim()));
  json::Value::Array out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const IrNode& node = g.nodes[i];
    if (node.op == "placeholder" || node.op == "output") {
      out.emplace_back(nullptr);
      continue;
    }
    const auto& js = nodes[i].at("strategy", "plan.nodes[" + std::to_string(i) + "]");
    OpStrategy s;
    for (const auto& x : js.at("inputs").as_array()) s.inputs.push_back(parse_spec(x.as_string()));
    for (const auto& x : js.at("outputs").as_array()) s.outputs.push_back(parse_spec(x.as_string()));
    out.push_back(local_call_args(g, static_cast<int>(i), s, coord));
  }
  return json::Value(std::move(out));
}

}  // namespace tlm
