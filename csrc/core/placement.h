// Placements of a tensor on an N-D device mesh, as small value types.
//
// Mirrors torch.distributed.tensor's Shard / Replicate / Partial: one
// Placement per mesh dim; a PlacementSpec is the list over mesh dims.
// Conversion to torch's own placement classes happens at the Python
// boundary; this header is torch-free.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tlm {

// Invalid user input (bad placement, bad mesh, bad shapes). Maps to
// ValueError in Python.
struct InvalidArgument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };
// Every reduce op, in enum order (the Python converter reads this list).
constexpr ReduceOp kReduceOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
const char* to_string(ReduceOp op);
ReduceOp parse_reduce_op(const std::string& s);  // "sum" | "avg" | "max" | "min"

struct Placement {
  enum class Kind : uint8_t { Replicate, Shard, Partial };
  Kind kind = Kind::Replicate;
  int dim = 0;                      // tensor dim, Shard only
  ReduceOp reduce = ReduceOp::Sum;  // Partial only

  static Placement replicate() { return {}; }
  static Placement shard(int d) { return {Kind::Shard, d, ReduceOp::Sum}; }
  static Placement partial(ReduceOp op = ReduceOp::Sum) { return {Kind::Partial, 0, op}; }

  bool is_replicate() const { return kind == Kind::Replicate; }
  bool is_shard() const { return kind == Kind::Shard; }
  bool is_shard(int d) const { return kind == Kind::Shard && dim == d; }
  bool is_partial() const { return kind == Kind::Partial; }

  // "R", "S(1)", "P(sum)" -- the same spelling the Python side prints.
  std::string to_string() const;

  friend bool operator==(const Placement& a, const Placement& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == Kind::Shard) return a.dim == b.dim;
    if (a.kind == Kind::Partial) return a.reduce == b.reduce;
    return true;
  }
  friend bool operator!=(const Placement& a, const Placement& b) { return !(a == b); }
  friend bool operator<(const Placement& a, const Placement& b) {  // deterministic ordering
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.kind == Kind::Shard) return a.dim < b.dim;
    if (a.kind == Kind::Partial) return a.reduce < b.reduce;
    return false;
  }
};

// One placement per mesh dim.
using PlacementSpec = std::vector<Placement>;

std::string to_string(const PlacementSpec& spec);  // "S(0)RP(sum)"
// Parses "S(0)R", "S(0),R", "[S(0), R]", "P(sum)"; "P" alone means P(sum).
Placement parse_placement(const std::string& s);
PlacementSpec parse_spec(const std::string& s);

// Throws InvalidArgument when `spec` does not fit a tensor of rank `ndim` on a
// mesh with `mesh_ndim` dims (wrong length, Shard dim out of range).
// Negative Shard dims are normalized in place.
void validate_spec(PlacementSpec& spec, int64_t ndim, size_t mesh_ndim, const std::string& what);

}  // namespace tlm
