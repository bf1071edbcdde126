#include "core/plan_json.h"

#include <cmath>

namespace tlm {

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
    if (!(o.time_limit_s > 0) || !std::isfinite(o.time_limit_s))
      throw InvalidArgument("options.time_limit: expected a finite, positive number of seconds");
  }
  if (auto* x = v.find("seed")) o.seed = static_cast<uint64_t>(x->as_int("options.seed"));
  if (auto* x = v.find("threads")) {
    o.threads = static_cast<int>(x->as_int("options.threads"));
    if (o.threads < 1) throw InvalidArgument("options.threads: expected at least 1");
  }
  // memory_limit: bytes, "device" (the default: the device's capacity minus
  // headroom), or "none" / null.
  if (auto* x = v.find("memory_limit"); x && x->is_null()) {
    o.memory_unlimited = true;
  } else if (x) {
    if (x->is_string()) {
      const std::string kind = x->as_string();
      if (kind == "none") o.memory_unlimited = true;
      else if (kind != "device")
        throw InvalidArgument("options.memory_limit: expected a positive byte count, 'device' or 'none', got '" +
                              kind + "'");
    } else {
      o.memory_limit_bytes = x->as_int("options.memory_limit");
      if (*o.memory_limit_bytes <= 0) throw InvalidArgument("options.memory_limit: expected a positive byte count");
    }
  }
  if (auto* x = v.find("gap_tolerance")) {
    o.gap_tolerance = x->as_double("options.gap_tolerance");
    if (!(o.gap_tolerance >= 0 && o.gap_tolerance < 1))
      throw InvalidArgument("options.gap_tolerance: expected a fraction in [0, 1)");
  }
  if (auto* x = v.find("fold_repeated")) o.fold_repeated = x->as_bool("options.fold_repeated");
  if (auto* x = v.find("plain_replicated_state"))
    o.plain_replicated_state = x->as_bool("options.plain_replicated_state");
  if (auto* x = v.find("optimizer_states")) {
    const int64_t k = x->as_int("options.optimizer_states");
    if (k < 0 || k > 16) throw InvalidArgument("options.optimizer_states: expected 0..16 tensors per parameter");
    o.optimizer_states = static_cast<int>(k);
  }
  if (auto* x = v.find("bucket_bytes")) {
    o.bucket_bytes = x->as_int("options.bucket_bytes");
    if (o.bucket_bytes < 0) throw InvalidArgument("options.bucket_bytes: expected a byte count >= 0 (0: no buckets)");
  }
  if (auto* x = v.find("fixed_params"))
    for (const auto& kv : x->as_object("options.fixed_params"))
      o.fixed_params[kv.first] = parse_spec(kv.second.as_string("options.fixed_params." + kv.first));
  if (auto* x = v.find("input_specs"))
    for (const auto& kv : x->as_object("options.input_specs"))
      o.input_specs[kv.first] = parse_spec(kv.second.as_string("options.input_specs." + kv.first));
  if (auto* x = v.find("replicated_outputs"))
    for (const auto& t : x->as_array("options.replicated_outputs"))
      o.replicated_outputs.insert(t.as_string("options.replicated_outputs[]"));
  if (auto* x = v.find("recompute"); x && !x->is_null()) o.recompute = x->as_bool("options.recompute");
  if (auto* x = v.find("recompute_only"); x && !x->is_null()) {
    o.recompute_only.emplace();
    for (const auto& name : x->as_array("options.recompute_only"))
      o.recompute_only->insert(name.as_string("options.recompute_only[]"));
  }
  if (auto* x = v.find("like"); x && !x->is_null()) {
    o.like = x->as_string("options.like");
    if (!known_like(o.like))
      throw InvalidArgument("options.like: expected 'ddp', 'fsdp2', 'tp' or null, got '" + o.like + "'");
  }
  if (auto* x = v.find("outputs")) {
    o.outputs = x->as_string("options.outputs");
    if (o.outputs != "free" && o.outputs != "replicated")
      throw InvalidArgument("options.outputs: expected 'free' or 'replicated', got '" + o.outputs + "'");
  }
  return o;
}

namespace {

json::Value spec_list(const std::vector<PlacementSpec>& specs) {
  json::Value::Array a;
  for (const auto& s : specs) a.emplace_back(s.empty() ? json::Value(nullptr) : json::Value(to_string(s)));
  return json::Value(std::move(a));
}

std::vector<PlacementSpec> read_specs(const json::Value& v, const std::string& what) {
  std::vector<PlacementSpec> out;
  for (const auto& x : v.as_array(what)) out.push_back(x.is_null() ? PlacementSpec{} : parse_spec(x.as_string(what)));
  return out;
}

json::Value node_json(const PlannedNode& n, bool output_node) {
  json::Value jn;
  jn.set("name", n.name);
  jn.set("op", n.op);
  json::Value js;
  js.set("inputs", spec_list(n.strategy.inputs));
  js.set("outputs", spec_list(n.strategy.outputs));
  jn.set("strategy", js);
  jn.set("compute_s", n.compute_s);
  jn.set("comm_s", n.comm_s);
  if (!n.redistributions.empty()) {
    json::Value::Array rs;
    for (const PlannedRedistribution& r : n.redistributions) {
      json::Value jr;
      jr.set("input", r.input);
      jr.set("producer", r.producer);
      jr.set("from", to_string(r.from));
      jr.set("to", to_string(r.to));
      jr.set("seconds", r.seconds);
      jr.set("collectives", json::Value(r.collectives));
      rs.push_back(std::move(jr));
    }
    jn.set("redistributions", json::Value(std::move(rs)));
  }
  if (output_node) return jn;
  jn.set("family", n.family);
  jn.set("num_strategies", n.num_strategies);
  jn.set("bytes", n.bytes);
  if (n.fell_back) jn.set("fell_back", true);
  if (n.recompute) {
    jn.set("recompute", true);
    jn.set("recompute_s", n.recompute_s);
  }
  return jn;
}

json::Value summary_json(const PlanSummary& s) {
  json::Value j;
  j.set("estimated_step_s", s.estimated_step_s);
  j.set("compute_s", s.compute_s);
  j.set("comm_s", s.comm_s);
  j.set("recompute_s", s.recompute_s);
  json::Value blocks;
  blocks.set("repeated", s.repeated_blocks);
  blocks.set("alike", s.blocks_alike);
  blocks.set("asymmetry_gain_s", s.asymmetry_gain_s);
  if (!s.folded.empty()) {
    blocks.set("folded", s.folded);
    blocks.set("folded_cost", solver::to_string(s.folded_cost));
  }
  j.set("blocks", blocks);
  j.set("peak_bytes", s.peak_bytes);
  j.set("memory_limit", s.memory_limit);
  j.set("memory_limit_source", s.memory_limit_source);
  j.set("build_seconds", s.build_seconds);
  json::Value mem;
  mem.set("parameters", s.memory.parameters);
  mem.set("gradients", s.memory.gradients);
  mem.set("optimizer_state", s.memory.optimizer_state);
  mem.set("activations", s.memory.activations);
  mem.set("peak", s.memory.peak);
  j.set("memory", mem);
  // For reports: live bytes while each node runs (memory_estimate.h) and the solve's progress.
  json::Value timeline;
  timeline.set("node", json::Value(s.memory.timeline_nodes));
  timeline.set("bytes", json::Value(s.memory.timeline_bytes));
  j.set("memory_timeline", timeline);
  json::Value progress;
  std::vector<double> seconds, cost, bound;
  for (const ProgressPoint& p : s.solver_progress) {
    seconds.push_back(p.seconds);
    cost.push_back(p.cost);
    bound.push_back(p.bound);
  }
  progress.set("seconds", json::Value(seconds));
  progress.set("cost", json::Value(cost));
  progress.set("bound", json::Value(bound));
  j.set("solver_progress", progress);
  json::Value js;
  js.set("cost", solver::to_string(s.solver.cost));
  js.set("bound", s.solver.bound);
  js.set("gap", s.solver.gap);
  js.set("seconds", s.solver.seconds);
  js.set("status", s.solver.status);
  if (!s.solver.note.empty()) js.set("note", s.solver.note);
  j.set("solver", js);
  j.set("fallback_ops", json::Value(s.fallback_ops));
  json::Value counts = json::Value::Object{};
  for (const auto& kv : s.strategy_counts) {
    json::Value c;
    c.set("nodes", kv.second.nodes);
    c.set("strategies", kv.second.strategies);
    counts.set(kv.first, c);
  }
  j.set("strategy_counts", counts);
  j.set("device", s.device);
  j.set("mode", s.mode);
  return j;
}

}  // namespace

json::Value plan_to_json(const Plan& plan) {
  json::Value doc;
  doc.set("format_version", kPlanFormatVersion);
  json::Value mesh;
  mesh.set("shape", json::Value(plan.mesh.shape));
  mesh.set("dim_names", json::Value(plan.mesh.dim_names));
  doc.set("mesh", mesh);
  json::Value::Array nodes;
  for (size_t i = 0; i < plan.nodes.size(); ++i) nodes.push_back(node_json(plan.nodes[i], i + 1 == plan.nodes.size()));
  doc.set("nodes", json::Value(std::move(nodes)));
  doc.set("summary", summary_json(plan.summary));
  return doc;
}

Plan plan_from_json(const json::Value& doc) {
  doc.as_object("plan");
  const int64_t version = doc.at("format_version", "plan").as_int("plan.format_version");
  if (version != kPlanFormatVersion)
    throw InvalidArgument("plan.format_version: " + std::to_string(version) + "; this version reads " +
                          std::to_string(kPlanFormatVersion));
  Plan plan;
  const json::Value& mesh = doc.at("mesh", "plan");
  std::vector<std::string> names;
  if (const auto* dn = mesh.find("dim_names"); dn && !dn->is_null())
    for (const auto& x : dn->as_array("plan.mesh.dim_names")) names.push_back(x.as_string("plan.mesh.dim_names"));
  plan.mesh = make_mesh(json::int_list(mesh.at("shape", "plan.mesh"), "plan.mesh.shape"), names);
  const auto& nodes = doc.at("nodes", "plan").as_array("plan.nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string w = "plan.nodes[" + std::to_string(i) + "]";
    PlannedNode pn;
    pn.name = nodes[i].at("name", w).as_string(w + ".name");
    pn.op = nodes[i].at("op", w).as_string(w + ".op");
    const json::Value& st = nodes[i].at("strategy", w);
    pn.strategy.inputs = read_specs(st.at("inputs", w + ".strategy"), w + ".strategy.inputs");
    pn.strategy.outputs = read_specs(st.at("outputs", w + ".strategy"), w + ".strategy.outputs");
    if (const auto* rc = nodes[i].find("recompute"); rc && !rc->is_null()) pn.recompute = rc->as_bool(w + ".recompute");
    plan.nodes.push_back(std::move(pn));
  }
  return plan;
}

json::Value explanation_to_json(const Explanation& ex) {
  json::Value doc;
  doc.set("node", ex.node);
  doc.set("name", ex.name);
  doc.set("op", ex.op);
  json::Value::Array alts;
  for (const Alternative& a : ex.alternatives) {
    json::Value ja;
    ja.set("inputs", spec_list(a.strategy.inputs));
    ja.set("outputs", spec_list(a.strategy.outputs));
    ja.set("compute_s", a.compute_s);
    ja.set("comm_in_s", a.comm_in_s);
    ja.set("comm_out_s", a.comm_out_s);
    ja.set("bytes", a.bytes);
    ja.set("chosen", a.chosen);
    ja.set("possible", a.possible);
    if (!a.why_not.empty()) ja.set("why_not", a.why_not);
    alts.push_back(std::move(ja));
  }
  doc.set("alternatives", json::Value(std::move(alts)));
  return doc;
}

}  // namespace tlm
