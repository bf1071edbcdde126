// The argument schemas of the ops with rules (op_schemas.inc, generated from
// torch's FunctionSchemas by tools/gen_op_schemas.py): the core is torch-free,
// yet rules read arguments by name and type (RuleCtx in rule.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace tlm::strategies {

// What an argument holds, as far as rules care; "int?" is Int with `optional`.
// Higher-order ops take subgraphs and tuples of anything (List, "Any[]").
enum class ArgKind { Tensor, TensorList, Int, IntList, Float, Scalar, Bool, BoolList, List, Subgraph, Str, Other };

struct ArgSchema {
  std::string name;
  std::string type;  // torch's spelling: "int[]?", "Scalar", "Tensor?"
  ArgKind kind = ArgKind::Other;
  bool optional = false;
  bool kwarg_only = false;
  bool has_default = false;
  json::Value dflt;  // in the IR's argument encoding (null for None)
};

struct OpSchema {
  std::string op;
  std::vector<ArgSchema> args;
  // How many values the op returns; nullopt when not fixed (a Tensor[] return, a
  // higher-order op). Rules index a node's outputs trusting this count, so RuleCtx
  // refuses a node that does not match it.
  std::optional<int> returns;
  // false when the generator found no such op (its library was not installed):
  // rules cannot read its arguments.
  bool known = true;
  // Position of argument `name`, or -1.
  int index_of(const char* name) const;
};

// The schema of `op`, or nullptr when op_schemas.inc does not list it.
const OpSchema* op_schema(const std::string& op);
// Every listed schema, sorted by op.
const std::vector<OpSchema>& all_op_schemas();

}  // namespace tlm::strategies
