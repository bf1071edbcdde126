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
#include <tuple>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/graph.h"
#include "core/strategy.h"

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

// Read access to a node and its arguments for rules.
struct RuleCtx {
  const Graph& g;
  int id;
  const IrNode& n;

  int num_inputs() const { return static_cast<int>(n.tensor_inputs.size()); }
  int num_outputs() const { return static_cast<int>(n.outputs.size()); }
  const TensorMeta& in(int k) const { return g.meta(n.tensor_inputs.at(k)); }
  const TensorMeta& out(int k) const { return n.outputs.at(k); }
  const Mesh& mesh() const { return g.mesh; }

  // Argument by schema position, or by keyword when passed as a kwarg.
  // nullptr when absent or null.
  const json::Value* arg(size_t pos, const char* name) const;
  int64_t int_arg(size_t pos, const char* name, int64_t dflt) const;
  double double_arg(size_t pos, const char* name, double dflt) const;
  bool bool_arg(size_t pos, const char* name, bool dflt) const;
  std::vector<int64_t> int_list_arg(size_t pos, const char* name) const;  // empty when absent; int -> [int]
  bool has_arg(size_t pos, const char* name) const { return arg(pos, name) != nullptr; }
  // Index into tensor_inputs of the tensor passed at `pos`/`name`, or -1.
  int tensor_index(size_t pos, const char* name) const;
  // Throws InvalidArgument naming the node.
  [[noreturn]] void fail(const std::string& what) const;
};

// Which (op, schema position, argument name) pairs rules read: rules name an
// argument by both, and a test compares every pair seen with the real op schema
// (torch's FunctionSchema), so a typo'd position or name cannot hide. Off by
// default (planning pays nothing); the strategy verifier switches it on.
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
OpWork elementwise_work(const RuleCtx& c, const OpStrategy& s, double flops_per_element = 1.0);
OpWork no_work(const RuleCtx& c, const OpStrategy& s);

// Args with argument `pos` (or kwarg `name`) replaced by `v`.
json::Value replace_arg(const RuleCtx& c, size_t pos, const char* name, json::Value v);

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

}  // namespace tlm::strategies
