#include "core/strategies/rule.h"

#include "core/strategies/shard_math.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

namespace tlm::strategies {

void DimRows::add(std::initializer_list<Placement> row) {
  if (static_cast<int>(row.size()) != width_)
    throw std::logic_error("strategy rule row has " + std::to_string(row.size()) + " placements, expected " +
                           std::to_string(width_));
  flat_.insert(flat_.end(), row.begin(), row.end());
}

void DimRows::add(const std::vector<Placement>& row) {
  if (static_cast<int>(row.size()) != width_)
    throw std::logic_error("strategy rule row has " + std::to_string(row.size()) + " placements, expected " +
                           std::to_string(width_));
  flat_.insert(flat_.end(), row.begin(), row.end());
}

void DimRows::add_uniform(const Placement& p) { flat_.insert(flat_.end(), static_cast<size_t>(width_), p); }

void add_partial_rows(const RuleCtx& c, DimRows& rows, const PartialRows& spec) {
  const int n_in = c.num_inputs(), n_out = c.num_outputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  for (ReduceOp op : spec.ops)
    for (const auto& set : spec.input_sets) {
      std::fill(row.begin(), row.end(), R());
      for (int k : set)
        if (k >= 0 && k < n_in) row[k] = P(op);
      const int partial_outputs =
          spec.outputs == PartialOutputs::All ? n_out : (spec.outputs == PartialOutputs::First ? std::min(1, n_out) : 0);
      for (int k = 0; k < partial_outputs; ++k) row[n_in + k] = P(op);
      rows.add(row);
    }
}

namespace {
std::atomic<bool> g_audit_on{false};
std::mutex g_audit_mu;
std::set<ArgAccess>& audit_set() {
  static std::set<ArgAccess> s;
  return s;
}
void audit(const std::string& op, size_t pos, const char* name) {
  if (!g_audit_on.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_audit_mu);
  audit_set().insert(ArgAccess{op, pos, name ? name : ""});
}
}  // namespace

void set_arg_audit(bool on) {
  std::lock_guard<std::mutex> lock(g_audit_mu);
  if (on) audit_set().clear();
  g_audit_on.store(on);
}

std::vector<ArgAccess> arg_audit_records() {
  std::lock_guard<std::mutex> lock(g_audit_mu);
  return {audit_set().begin(), audit_set().end()};
}

const json::Value* RuleCtx::arg(size_t pos, const char* name) const {
  audit(n.op, pos, name);
  const auto& a = n.args.as_array();
  if (pos < a.size()) return a[pos].is_null() ? nullptr : &a[pos];
  if (name == nullptr) return nullptr;
  const json::Value* v = n.kwargs.find(name);
  return (v == nullptr || v->is_null()) ? nullptr : v;
}

void RuleCtx::fail(const std::string& what) const {
  throw InvalidArgument("node '" + n.name + "' (" + n.op + "): " + what);
}

int64_t RuleCtx::int_arg(size_t pos, const char* name, int64_t dflt) const {
  const json::Value* v = arg(pos, name);
  if (v == nullptr) return dflt;
  if (v->is_bool()) return v->as_bool() ? 1 : 0;
  if (!v->is_int()) fail(std::string("argument '") + (name ? name : "?") + "' is not an integer");
  return v->as_int();
}

double RuleCtx::double_arg(size_t pos, const char* name, double dflt) const {
  const json::Value* v = arg(pos, name);
  if (v == nullptr) return dflt;
  if (v->is_number()) return v->as_double();
  if (v->is_bool()) return v->as_bool() ? 1.0 : 0.0;
  if (v->is_object())
    if (const auto* f = v->find("float")) {
      const std::string& s = f->as_string();
      if (s == "inf") return 1.0 / 0.0;
      if (s == "-inf") return -1.0 / 0.0;
      return 0.0 / 0.0;
    }
  fail(std::string("argument '") + (name ? name : "?") + "' is not a number");
}

bool RuleCtx::bool_arg(size_t pos, const char* name, bool dflt) const {
  const json::Value* v = arg(pos, name);
  if (v == nullptr) return dflt;
  if (v->is_bool()) return v->as_bool();
  if (v->is_int()) return v->as_int() != 0;
  fail(std::string("argument '") + (name ? name : "?") + "' is not a bool");
}

std::vector<int64_t> RuleCtx::int_list_arg(size_t pos, const char* name) const {
  const json::Value* v = arg(pos, name);
  if (v == nullptr) return {};
  if (v->is_int()) return {v->as_int()};
  return json::int_list(*v, n.name + "." + (name ? name : "arg"));
}

static int count_refs(const json::Value& v) {
  std::vector<TensorRef> tmp;
  collect_tensor_refs(v, tmp);
  return static_cast<int>(tmp.size());
}

int RuleCtx::tensor_index(size_t pos, const char* name) const {
  audit(n.op, pos, name);
  const auto& a = n.args.as_array();
  int before = 0;
  if (pos < a.size()) {
    for (size_t i = 0; i < pos; ++i) before += count_refs(a[i]);
    return is_tensor_ref(a[pos]) ? before : -1;
  }
  if (name == nullptr) return -1;
  for (const auto& x : a) before += count_refs(x);
  for (const auto& kv : n.kwargs.as_object()) {
    if (kv.first == name) return is_tensor_ref(kv.second) ? before : -1;
    before += count_refs(kv.second);
  }
  return -1;
}

int wrap_dim(int64_t d, int64_t ndim) {
  const int64_t r = ndim == 0 ? 1 : ndim;
  if (d < -r || d >= r)
    throw InvalidArgument("dim " + std::to_string(d) + " is out of range for a tensor of rank " +
                          std::to_string(ndim));
  return static_cast<int>(d < 0 ? d + r : d);
}

void add_rule(Registry& r, std::initializer_list<const char*> ops, const Rule& rule) {
  for (const char* op : ops) r[op] = rule;
}

std::vector<int64_t> local_shape_in(const RuleCtx& c, const OpStrategy& s, int k) {
  return largest_local_shape(c.in(k).shape, c.mesh(), s.inputs.at(k));
}
std::vector<int64_t> local_shape_out(const RuleCtx& c, const OpStrategy& s, int k) {
  return largest_local_shape(c.out(k).shape, c.mesh(), s.outputs.at(k));
}
int64_t local_numel_in(const RuleCtx& c, const OpStrategy& s, int k) {
  return largest_local_numel(c.in(k).shape, c.mesh(), s.inputs.at(k));
}
int64_t local_numel_out(const RuleCtx& c, const OpStrategy& s, int k) {
  return largest_local_numel(c.out(k).shape, c.mesh(), s.outputs.at(k));
}

double io_bytes(const RuleCtx& c, const OpStrategy& s) {
  double b = 0;
  for (int k = 0; k < c.num_inputs(); ++k)
    b += static_cast<double>(local_numel_in(c, s, k)) * element_size(c.in(k).dtype);
  for (int k = 0; k < c.num_outputs(); ++k)
    b += static_cast<double>(local_numel_out(c, s, k)) * element_size(c.out(k).dtype);
  return b;
}

OpWork elementwise_work(const RuleCtx& c, const OpStrategy& s, double flops_per_element) {
  OpWork w;
  double n = 0;
  for (int k = 0; k < c.num_outputs(); ++k) n += static_cast<double>(local_numel_out(c, s, k));
  w.flops = n * flops_per_element;
  w.bytes = io_bytes(c, s);
  return w;
}

OpWork no_work(const RuleCtx&, const OpStrategy&) { return OpWork{}; }

json::Value replace_arg(const RuleCtx& c, size_t pos, const char* name, json::Value v) {
  audit(c.n.op, pos, name);
  json::Value args = c.n.args;
  json::Value kwargs = c.n.kwargs;
  // Copy-on-write: the IR's arrays are shared, so rebuild the containers we touch.
  json::Value::Array a = args.as_array();
  json::Value::Object kw = kwargs.as_object();
  if (pos < a.size()) {
    a[pos] = std::move(v);
  } else {
    bool found = false;
    for (auto& kv : kw)
      if (kv.first == name) {
        kv.second = std::move(v);
        found = true;
      }
    if (!found) kw.emplace_back(name, std::move(v));
  }
  json::Value out = json::Value::Object{};
  out.set("args", json::Value(std::move(a)));
  out.set("kwargs", json::Value(std::move(kw)));
  return out;
}

}  // namespace tlm::strategies
