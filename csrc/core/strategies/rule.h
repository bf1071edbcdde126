// Internal interface between the strategy engine (strategy.cpp) and the
// per-family rule files in this directory.
//
// A rule describes an op on ONE mesh dim: a list of rows, each fixing one
// placement per tensor input then per tensor output (e.g. mm:
// [S(0),R -> S(0)], [R,S(1) -> S(1)], [S(1),S(0) -> P(sum)], [R,R -> R]).
// The engine takes the cartesian product over mesh dims, drops combinations
// that are invalid for the concrete shapes (generic shardability plus the
// rule's own `valid` check, e.g. exact view factoring on uneven shards) and
// keeps the rest in deterministic order.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph.h"
#include "core/strategy.h"
#include "core/strategies/op_schema.h"

namespace tlm::strategies {

inline Placement R() { return Placement::replicate(); }
inline Placement S(int d) { return Placement::shard(d); }
inline Placement P(ReduceOp op = ReduceOp::Sum) { return Placement::partial(op); }

// Single-mesh-dim strategies of one node: rows of `width` placements.
class DimRows {
 public:
  explicit DimRows(int width) : width_(width) {}
  int width() const { return width_; }
  size_t size() const { return width_ == 0 ? 0 : flat_.size() / width_; }
  const Placement* row(size_t i) const { return flat_.data() + i * width_; }
  void add(std::initializer_list<Placement> row);
  void add(const std::vector<Placement>& row);
  // Adds a row where every input and output has the same placement.
  void add_uniform(const Placement& p);

 private:
  int width_;
  std::vector<Placement> flat_;
};

// Partial rows of an op that is linear in some of its inputs: for each set
// in `input_sets`, those inputs Partial(op) (together) and the other inputs
// Replicate give `outputs` Partial(op), the other outputs Replicate. Rows come
// op-major (for op: for set), the order rules have always listed them in.
// Sum and avg by default: a linear map commutes with both. Max and min pass
// only through order-preserving copies (views, exact casts): those rules list
// them. Negative entries of a set (an absent optional input) are skipped.
enum class PartialOutputs { All, First, None };
struct PartialRows {
  std::vector<std::vector<int>> input_sets;
  PartialOutputs outputs = PartialOutputs::All;
  std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Avg};
};
struct RuleCtx;
void add_partial_rows(const RuleCtx& c, DimRows& rows, const PartialRows& spec);
inline const std::vector<ReduceOp> kAllReduceOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};

// A value a rule puts in a rank's call (CallArgsFn): None, an int or an int list.
struct ArgValue {
  json::Value v;
  ArgValue(std::nullptr_t) {}
  ArgValue(int64_t x) : v(x) {}
  ArgValue(const std::vector<int64_t>& xs) : v(xs) {}
};

// A rule read an argument its op's schema does not have, or with an accessor that
// does not fit the argument's type: a bug in the rule (or a stale op_schemas.inc).
struct RuleSchemaError : std::logic_error {
  using std::logic_error::logic_error;
};

// Read access to a node and its arguments for rules.
struct RuleCtx {
  RuleCtx(const Graph& g, int id, const IrNode& n);

  const Graph& g;
  int id;
  const IrNode& n;

  int num_inputs() const { return static_cast<int>(n.tensor_inputs.size()); }
  int num_outputs() const { return static_cast<int>(n.outputs.size()); }
  // Bounds-checked (InvalidArgument naming the node): a rule that trusts an op's
  // arity meets a malformed node as an exception, never as a read past the end.
  // One compare, as the .at() it replaces; the message is built only on a refusal.
  const TensorMeta& in(int k) const {
    if (k < 0 || k >= num_inputs()) bad_index("input", k, num_inputs());
    return g.meta(n.tensor_inputs[static_cast<size_t>(k)]);
  }
  const TensorMeta& out(int k) const {
    if (k < 0 || k >= num_outputs()) bad_index("output", k, num_outputs());
    return n.outputs[static_cast<size_t>(k)];
  }
  const Mesh& mesh() const { return g.mesh; }

  // The context is made only for a node whose outputs match its op's schema
  // (op_schemas.inc): as many as the op returns, or, where the exporter recorded
  // output_positions (absent None outputs dropped), distinct increasing positions
  // below that count, one per output. Otherwise the constructor throws
  // InvalidArgument naming the node, the op, its output count and the expected one.
  //
  // Typed arguments by schema name. The node's arguments (positional or keyword)
  // are bound to the op's schema (op_schemas.inc, generated from torch) once, when
  // the context is made; an absent argument takes the schema's default. A name the
  // schema lacks, or an accessor that does not fit the argument's type, throws
  // RuleSchemaError; a value that does not fit its type throws InvalidArgument.
  int64_t int_arg(const char* name) const;                   // int (a bool reads as 0/1)
  std::optional<int64_t> opt_int(const char* name) const;    // int?: nullopt for None
  std::vector<int64_t> int_list(const char* name) const;     // int[] or int (-> [int]); None -> empty
  double scalar(const char* name) const;                     // float or Scalar (inf and nan too)
  std::optional<int64_t> int_scalar(const char* name) const; // Scalar: its value when an integer
  bool flag(const char* name) const;                         // bool
  std::string str_arg(const char* name) const;               // str
  std::vector<bool> flags(const char* name) const;           // bool[]; None -> empty
  bool has(const char* name) const;                          // given or defaulted, and not None
  bool schema_has(const char* name) const;                   // the op's schema has this argument
  // Index into tensor_inputs of the Tensor / Tensor? argument, -1 for None.
  int tensor(const char* name) const;
  // Per item of a Tensor[] / Tensor?[] / Any[] argument, its index into
  // tensor_inputs (-1: not a tensor); empty for None.
  std::vector<int> tensor_list(const char* name) const;
  // Where argument `name`'s tensors (depth first) start in tensor_inputs, and how many.
  std::pair<int, int> tensor_range(const char* name) const;
  // Items of a list argument; nullopt when it is None or not a list.
  std::optional<size_t> list_size(const char* name) const;
  // The graph a Subgraph argument (or item `i` of a list argument) names; "" when it is no subgraph.
  std::string subgraph(const char* name) const;
  std::string subgraph_item(const char* list, size_t i) const;
  // What the exporter recorded about a subgraph's placeholder `k`: whether the
  // subgraph may read it (true when unknown), and the buffers it indexes with it
  // as (buffer placeholder, dim) pairs (nullopt when unknown).
  bool subgraph_may_read(const std::string& subgraph, int k) const;
  std::optional<std::vector<std::pair<int64_t, int64_t>>> subgraph_index_buffers(const std::string& subgraph,
                                                                                 int k) const;

  // Multi-output ops: the schema's output position of each IR output, when the
  // exporter dropped absent (None) outputs; nullopt when it kept them all.
  std::optional<std::vector<int64_t>> output_positions() const;
  // Per tensor input, whether it was contiguous when traced; nullopt when not recorded.
  std::optional<std::vector<bool>> contiguous_inputs() const;

  // A rank's call (CallArgsFn's result): the node's arguments unchanged, or with
  // some replaced (a positional argument stays positional, others become keywords).
  json::Value same_args() const;
  json::Value with_args(std::initializer_list<std::pair<const char*, ArgValue>> changes) const;

  // Throws InvalidArgument naming the node.
  [[noreturn]] void fail(const std::string& what) const;

 private:
  // The schema's argument `name` and its position; throws RuleSchemaError unless
  // its kind is one of `kinds` (empty: any).
  const ArgSchema& schema_arg(const char* name, std::initializer_list<ArgKind> kinds, const char* accessor,
                              size_t* pos) const;
  // The bound value of argument `name` (given, else the schema default), nullptr for None.
  const json::Value* value(const char* name, std::initializer_list<ArgKind> kinds, const char* accessor,
                           const ArgSchema** arg = nullptr) const;
  [[noreturn]] void bad_index(const char* what, int k, int count) const;
  void check_outputs() const;
  int tensor_index_at(size_t pos, const std::string& name) const;
  int tensors_before(size_t pos, const std::string& name) const;

  const OpSchema* schema_;
  std::vector<const json::Value*> bound_;  // per schema argument; nullptr for None / absent
};

// Which (op, schema position, argument name) triples rules read, the position
// taken from op_schemas.inc: verify-strategies compares every triple seen with
// torch's own FunctionSchema, so a stale op_schemas.inc cannot hide. Off by
// default (planning pays nothing); the verifier and a GoogleTest switch it on.
struct ArgAccess {
  std::string op;
  size_t pos;
  std::string name;
  bool operator<(const ArgAccess& o) const {
    return std::tie(op, pos, name) < std::tie(o.op, o.pos, o.name);
  }
};
void set_arg_audit(bool on);
std::vector<ArgAccess> arg_audit_records();  // sorted, distinct

// Normalizes a possibly negative dim against rank `ndim` (rank 0 accepts 0 and -1).
int wrap_dim(int64_t d, int64_t ndim);

using DimsFn = std::function<void(const RuleCtx&, DimRows&)>;
using ValidFn = std::function<bool(const RuleCtx&, const OpStrategy&)>;
using WorkFn = std::function<OpWork(const RuleCtx&, const OpStrategy&)>;
using CallArgsFn = std::function<json::Value(const RuleCtx&, const OpStrategy&, const std::vector<int64_t>&)>;

struct Rule {
  std::string family;
  DimsFn dims;
  ValidFn valid;        // optional: extra check on a combined (all mesh dims) strategy
  // optional, instead of `valid`: builds the node's check once (precomputing
  // what depends only on shapes and arguments) before the combinations run.
  std::function<ValidFn(const RuleCtx&)> make_valid;
  WorkFn work;          // optional: default = elementwise (1 flop per output element, bytes of all tensors)
  CallArgsFn call_args;  // optional: default = args unchanged
};

using Registry = std::unordered_map<std::string, Rule>;

// Registers `rule` under every name in `ops` (full overload names, "aten.mm.default").
void add_rule(Registry& r, std::initializer_list<const char*> ops, const Rule& rule);

// Work helpers shared by rules.
int64_t local_numel_in(const RuleCtx& c, const OpStrategy& s, int k);
int64_t local_numel_out(const RuleCtx& c, const OpStrategy& s, int k);
std::vector<int64_t> local_shape_in(const RuleCtx& c, const OpStrategy& s, int k);
std::vector<int64_t> local_shape_out(const RuleCtx& c, const OpStrategy& s, int k);
// Bytes of all inputs and outputs on the largest shard.
double io_bytes(const RuleCtx& c, const OpStrategy& s);
// A `valid` check for kernels that fail on an empty local piece: no input dim a strategy
// shards leaves a rank with none of it.
bool no_empty_local_input(const RuleCtx& c, const OpStrategy& s);
OpWork elementwise_work(const RuleCtx& c, const OpStrategy& s, double flops_per_element = 1.0);
OpWork no_work(const RuleCtx& c, const OpStrategy& s);
// No bytes moved, one dispatch: priced at the device's kernel overhead (one flop stands for it).
OpWork dispatch_work(const RuleCtx& c, const OpStrategy& s);
// Call arguments with `name` (a factory's size, a backward's input sizes) set to this rank's
// local shape of output 0.
CallArgsFn output_shape_arg(const char* name);


// Family registration, one per file.
void register_pointwise(Registry& r);
void register_matmul(Registry& r);
void register_reduction(Registry& r);
void register_view(Registry& r);
void register_factory(Registry& r);
void register_norm(Registry& r);
void register_softmax(Registry& r);
void register_attention(Registry& r);
void register_embedding(Registry& r);
void register_loss(Registry& r);
void register_conv(Registry& r);
void register_indexing(Registry& r);
void register_advanced_indexing(Registry& r);
void register_random(Registry& r);
void register_fft(Registry& r);

}  // namespace tlm::strategies
