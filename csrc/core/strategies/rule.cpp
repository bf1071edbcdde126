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
      // A bool tensor has no pending sum (or average, max, min): a value is true or false.
      bool has_bool = false;
      for (int k : set) has_bool = has_bool || (k >= 0 && k < n_in && c.in(k).dtype == DType::Bool);
      if (has_bool) continue;
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

namespace {

const char* kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::Tensor: return "Tensor";
    case ArgKind::TensorList: return "Tensor[]";
    case ArgKind::Int: return "int";
    case ArgKind::IntList: return "int[]";
    case ArgKind::Float: return "float";
    case ArgKind::Scalar: return "Scalar";
    case ArgKind::Bool: return "bool";
    case ArgKind::BoolList: return "bool[]";
    case ArgKind::List: return "Any[]";
    case ArgKind::Subgraph: return "Subgraph";
    case ArgKind::Str: return "str";
    case ArgKind::Other: break;
  }
  return "other";
}

int count_refs(const json::Value& v) {
  std::vector<TensorRef> tmp;
  collect_tensor_refs(v, tmp);
  return static_cast<int>(tmp.size());
}

}  // namespace

RuleCtx::RuleCtx(const Graph& g_, int id_, const IrNode& n_) : g(g_), id(id_), n(n_), schema_(op_schema(n_.op)) {
  if (schema_ == nullptr || !schema_->known) return;
  check_outputs();
  if (!n.args.is_array()) return;
  const auto& a = n.args.as_array();
  bound_.assign(schema_->args.size(), nullptr);
  for (size_t i = 0; i < bound_.size(); ++i) {
    const ArgSchema& s = schema_->args[i];
    const json::Value* v = i < a.size() ? &a[i] : (n.kwargs.is_object() ? n.kwargs.find(s.name) : nullptr);
    if (v == nullptr && s.has_default) v = &s.dflt;
    bound_[i] = (v == nullptr || v->is_null()) ? nullptr : v;
  }
}

const ArgSchema& RuleCtx::schema_arg(const char* name, std::initializer_list<ArgKind> kinds, const char* accessor,
                                     size_t* pos) const {
  // Built only on a refusal: reads sit on the planner's hot paths.
  auto where = [&] { return "node '" + n.name + "' (" + n.op + "): the rule reads argument '" + name + "'"; };
  if (schema_ == nullptr)
    throw RuleSchemaError(where() + ", but op_schemas.inc has no schema for the op (rerun tools/gen_op_schemas.py)");
  if (!schema_->known)
    throw RuleSchemaError(where() + ", but op_schemas.inc lists the op without a schema (rerun "
                          "tools/gen_op_schemas.py where its library is installed)");
  const int i = schema_->index_of(name);
  if (i < 0) {
    std::string names;
    for (const auto& s : schema_->args) names += (names.empty() ? "" : ", ") + s.name;
    throw RuleSchemaError(where() + ", which the op's schema does not have (its arguments: " + names + ")");
  }
  const ArgSchema& s = schema_->args[static_cast<size_t>(i)];
  if (kinds.size() != 0 && std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) {
    std::string want;
    for (ArgKind k : kinds) want += std::string(want.empty() ? "" : " or ") + kind_name(k);
    throw RuleSchemaError(where() + " with " + accessor + " (for " + want + "), but the schema types it " + s.type);
  }
  audit(n.op, static_cast<size_t>(i), name);
  *pos = static_cast<size_t>(i);
  return s;
}

const json::Value* RuleCtx::value(const char* name, std::initializer_list<ArgKind> kinds, const char* accessor,
                                  const ArgSchema** arg) const {
  size_t pos = 0;
  const ArgSchema& s = schema_arg(name, kinds, accessor, &pos);
  if (arg != nullptr) *arg = &s;
  return pos < bound_.size() ? bound_[pos] : nullptr;
}

void RuleCtx::fail(const std::string& what) const {
  throw InvalidArgument("node '" + n.name + "' (" + n.op + "): " + what);
}

void RuleCtx::bad_index(const char* what, int k, int count) const {
  fail("the rule reads " + std::string(what) + " " + std::to_string(k) + ", but the node has " +
       std::to_string(count) + " tensor " + what + (count == 1 ? "" : "s"));
}

namespace {
std::string outputs_text(int k) { return std::to_string(k) + (k == 1 ? " output" : " outputs"); }
}  // namespace

// Rules index a node's outputs (and their rows) by the op's arity: a node that does
// not match it is refused here, before any rule runs, not met as a write past a row.
void RuleCtx::check_outputs() const {
  if (!schema_->returns) return;
  const int expected = *schema_->returns;
  const json::Value* pos = n.extra.is_object() ? n.extra.find("output_positions") : nullptr;
  if (pos == nullptr) {
    if (num_outputs() != expected)
      fail("has " + outputs_text(num_outputs()) + ", but the op returns " + std::to_string(expected) +
           " (its schema in op_schemas.inc)");
    return;
  }
  const auto& positions = pos->as_array("output_positions");
  if (static_cast<int>(positions.size()) != num_outputs())
    fail("has " + outputs_text(num_outputs()) + " but " + std::to_string(positions.size()) +
         " output_positions; expected one position per output");
  int64_t prev = -1;
  for (const auto& p : positions) {
    const int64_t i = p.as_int("output position");
    if (i <= prev || i >= expected)
      fail("output position " + std::to_string(i) + " is not valid: expected distinct increasing positions below " +
           std::to_string(expected) + ", the number of values the op returns (its schema in op_schemas.inc)");
    prev = i;
  }
}

int64_t RuleCtx::int_arg(const char* name) const {
  const ArgSchema* s = nullptr;
  const json::Value* v = value(name, {ArgKind::Int}, "int_arg", &s);
  if (v == nullptr) fail(std::string("argument '") + name + "' (" + s->type + ") is missing or None");
  if (v->is_bool()) return v->as_bool() ? 1 : 0;
  if (!v->is_int()) fail(std::string("argument '") + name + "' is not an integer");
  return v->as_int();
}

std::optional<int64_t> RuleCtx::opt_int(const char* name) const {
  const json::Value* v = value(name, {ArgKind::Int}, "opt_int");
  if (v == nullptr) return std::nullopt;
  if (v->is_bool()) return v->as_bool() ? 1 : 0;
  if (!v->is_int()) fail(std::string("argument '") + name + "' is not an integer");
  return v->as_int();
}

std::string RuleCtx::str_arg(const char* name) const {
  const ArgSchema* s = nullptr;
  const json::Value* v = value(name, {ArgKind::Str}, "str_arg", &s);
  if (v == nullptr) fail(std::string("argument '") + name + "' (" + s->type + ") is missing or None");
  if (!v->is_string()) fail(std::string("argument '") + name + "' is not a string");
  return v->as_string();
}

std::vector<int64_t> RuleCtx::int_list(const char* name) const {
  const json::Value* v = value(name, {ArgKind::IntList, ArgKind::Int}, "int_list");
  if (v == nullptr) return {};
  if (v->is_int()) return {v->as_int()};
  return json::int_list(*v, n.name + "." + name);
}

double RuleCtx::scalar(const char* name) const {
  const ArgSchema* s = nullptr;
  const json::Value* v = value(name, {ArgKind::Float, ArgKind::Scalar}, "scalar", &s);
  if (v == nullptr) fail(std::string("argument '") + name + "' (" + s->type + ") is missing or None");
  if (v->is_number()) return v->as_double();
  if (v->is_bool()) return v->as_bool() ? 1.0 : 0.0;
  if (v->is_object())
    if (const auto* f = v->find("float")) {
      const std::string& x = f->as_string();
      if (x == "inf") return 1.0 / 0.0;
      if (x == "-inf") return -1.0 / 0.0;
      return 0.0 / 0.0;
    }
  fail(std::string("argument '") + name + "' is not a number");
}

std::optional<int64_t> RuleCtx::int_scalar(const char* name) const {
  const json::Value* v = value(name, {ArgKind::Scalar}, "int_scalar");
  if (v == nullptr || !v->is_int()) return std::nullopt;
  return v->as_int();
}

bool RuleCtx::flag(const char* name) const {
  const ArgSchema* s = nullptr;
  const json::Value* v = value(name, {ArgKind::Bool}, "flag", &s);
  if (v == nullptr) fail(std::string("argument '") + name + "' (" + s->type + ") is missing or None");
  if (v->is_bool()) return v->as_bool();
  if (v->is_int()) return v->as_int() != 0;
  fail(std::string("argument '") + name + "' is not a bool");
}

std::vector<bool> RuleCtx::flags(const char* name) const {
  const json::Value* v = value(name, {ArgKind::BoolList}, "flags");
  if (v == nullptr) return {};
  std::vector<bool> out;
  for (const auto& x : v->as_array(n.name + "." + name))
    out.push_back(x.is_bool() ? x.as_bool() : (x.is_int() && x.as_int() != 0));
  return out;
}

bool RuleCtx::has(const char* name) const { return value(name, {}, "has") != nullptr; }

bool RuleCtx::schema_has(const char* name) const {
  return schema_ != nullptr && schema_->index_of(name) >= 0;
}

// Tensor inputs come in argument order (args, then kwargs), depth first.
int RuleCtx::tensors_before(size_t pos, const std::string& name) const {
  const auto& a = n.args.as_array();
  int before = 0;
  if (pos < a.size()) {
    for (size_t i = 0; i < pos; ++i) before += count_refs(a[i]);
    return before;
  }
  for (const auto& x : a) before += count_refs(x);
  for (const auto& kv : n.kwargs.as_object()) {
    if (kv.first == name) break;
    before += count_refs(kv.second);
  }
  return before;
}

int RuleCtx::tensor_index_at(size_t pos, const std::string& name) const {
  const auto& a = n.args.as_array();
  const json::Value* v = pos < a.size() ? &a[pos] : n.kwargs.find(name);
  return v != nullptr && is_tensor_ref(*v) ? tensors_before(pos, name) : -1;
}

int RuleCtx::tensor(const char* name) const {
  size_t pos = 0;
  schema_arg(name, {ArgKind::Tensor}, "tensor", &pos);
  return tensor_index_at(pos, name);
}

std::vector<int> RuleCtx::tensor_list(const char* name) const {
  size_t pos = 0;
  schema_arg(name, {ArgKind::TensorList, ArgKind::List}, "tensor_list", &pos);
  const json::Value* list = pos < bound_.size() ? bound_[pos] : nullptr;
  if (list == nullptr || !list->is_array()) return {};
  int first = tensors_before(pos, name);
  std::vector<int> out;
  for (const auto& item : list->as_array()) {
    out.push_back(is_tensor_ref(item) ? first : -1);
    first += count_refs(item);
  }
  return out;
}

std::pair<int, int> RuleCtx::tensor_range(const char* name) const {
  size_t pos = 0;
  schema_arg(name, {}, "tensor_range", &pos);
  const json::Value* v = pos < bound_.size() ? bound_[pos] : nullptr;
  return {tensors_before(pos, name), v == nullptr ? 0 : count_refs(*v)};
}

std::optional<size_t> RuleCtx::list_size(const char* name) const {
  const json::Value* v = value(name, {ArgKind::TensorList, ArgKind::IntList, ArgKind::BoolList, ArgKind::List},
                               "list_size");
  if (v == nullptr || !v->is_array()) return std::nullopt;
  return v->size();
}

namespace {
std::string subgraph_name(const json::Value* v) {
  const json::Value* name = v != nullptr && v->is_object() ? v->find("subgraph") : nullptr;
  return name != nullptr && name->is_string() ? name->as_string() : std::string();
}
}  // namespace

std::string RuleCtx::subgraph(const char* name) const {
  return subgraph_name(value(name, {ArgKind::Subgraph}, "subgraph"));
}

std::string RuleCtx::subgraph_item(const char* list, size_t i) const {
  const json::Value* v = value(list, {ArgKind::List}, "subgraph_item");
  if (v == nullptr || !v->is_array() || i >= v->size()) return {};
  return subgraph_name(&v->as_array()[i]);
}

bool RuleCtx::subgraph_may_read(const std::string& subgraph, int k) const {
  const json::Value* reads = n.extra.is_object() ? n.extra.find("subgraph_reads") : nullptr;
  const json::Value* r = (!subgraph.empty() && reads && reads->is_object()) ? reads->find(subgraph) : nullptr;
  if (r == nullptr || !r->is_array() || k < 0 || static_cast<size_t>(k) >= r->size()) return true;
  return r->as_array()[static_cast<size_t>(k)].as_bool("subgraph_reads entry");
}

std::optional<std::vector<std::pair<int64_t, int64_t>>> RuleCtx::subgraph_index_buffers(const std::string& subgraph,
                                                                                        int k) const {
  const json::Value* all = n.extra.is_object() ? n.extra.find("subgraph_index_buffers") : nullptr;
  const json::Value* per = (!subgraph.empty() && all && all->is_object()) ? all->find(subgraph) : nullptr;
  if (per == nullptr || !per->is_array() || k < 0 || static_cast<size_t>(k) >= per->size()) return std::nullopt;
  const json::Value& pairs = per->as_array()[static_cast<size_t>(k)];
  if (!pairs.is_array()) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& pair : pairs.as_array()) {
    const auto& pd = pair.as_array("subgraph_index_buffers entry");
    out.emplace_back(pd.at(0).as_int("buffer placeholder"), pd.at(1).as_int("buffer dim"));
  }
  return out;
}

std::optional<std::vector<int64_t>> RuleCtx::output_positions() const {
  const json::Value* pos = n.extra.is_object() ? n.extra.find("output_positions") : nullptr;
  if (pos == nullptr) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& p : pos->as_array("output_positions")) out.push_back(p.as_int("output position"));
  return out;
}

std::optional<std::vector<bool>> RuleCtx::contiguous_inputs() const {
  const json::Value* flags = n.extra.is_object() ? n.extra.find("contiguous_inputs") : nullptr;
  if (flags == nullptr || !flags->is_array()) return std::nullopt;
  std::vector<bool> out;
  for (const auto& f : flags->as_array()) out.push_back(f.is_bool() && f.as_bool());
  return out;
}

json::Value RuleCtx::same_args() const {
  json::Value out = json::Value::Object{};
  out.set("args", n.args);
  out.set("kwargs", n.kwargs);
  return out;
}

json::Value RuleCtx::with_args(std::initializer_list<std::pair<const char*, ArgValue>> changes) const {
  // Copy-on-write: the IR's arrays are shared, so rebuild the containers we touch.
  json::Value::Array a = n.args.as_array();
  json::Value::Object kw = n.kwargs.as_object();
  for (const auto& [name, v] : changes) {
    size_t pos = 0;
    schema_arg(name, {}, "with_args", &pos);
    if (pos < a.size()) {
      a[pos] = v.v;
      continue;
    }
    bool found = false;
    for (auto& kv : kw)
      if (kv.first == name) {
        kv.second = v.v;
        found = true;
      }
    if (!found) kw.emplace_back(name, v.v);
  }
  json::Value out = json::Value::Object{};
  out.set("args", json::Value(std::move(a)));
  out.set("kwargs", json::Value(std::move(kw)));
  return out;
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

bool no_empty_local_input(const RuleCtx& c, const OpStrategy& s) {
  for (int t = 0; t < c.num_inputs(); ++t)
    for (const auto& p : s.inputs[t])
      if (p.is_shard() && !no_empty_shard(c.in(t).shape[p.dim], c.mesh(), s.inputs[t], p.dim)) return false;
  return true;
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
OpWork dispatch_work(const RuleCtx&, const OpStrategy&) { return OpWork{1, 0}; }

CallArgsFn output_shape_arg(const char* name) {
  return [name](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
    return c.with_args({{name, local_shape(c.out(0).shape, c.mesh(), s.outputs[0], coord)}});
  };
}

}  // namespace tlm::strategies
