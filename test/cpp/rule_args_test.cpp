// Rules read arguments by name through typed accessors decoded from the op's
// schema (op_schemas.inc, generated from torch): the table covers every rule,
// the accessors decode and refuse as documented, and every rule's reads pass
// the schema audit on a node built from its op's schema.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "core/strategies/op_schema.h"
#include "core/strategies/rule.h"
#include "strategy_test_util.h"

using namespace tlm;
using namespace tlm::strategies;
using namespace tlm::test;

namespace {

// The op node of a one_op_graph.
const IrNode& op_node(const Graph& g) { return g.nodes[g.nodes.size() - 2]; }
int op_id(const Graph& g) { return static_cast<int>(g.nodes.size()) - 2; }

Graph sum_graph(const std::string& args, const std::string& kwargs = "{}") {
  return one_op_graph({2}, {{{4, 6}}}, "aten.sum.dim_IntList", args, {{{4}}}, kwargs);
}

// The message of the `E` that `f` throws ("" when it throws none).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(RuleArgSchemas, EveryOpWithARuleHasASchema) {
  for (const auto& op : ops_with_rules()) {
    const OpSchema* s = op_schema(op);
    ASSERT_NE(s, nullptr) << op << " has a rule but no entry in op_schemas.inc (rerun tools/gen_op_schemas.py)";
    EXPECT_TRUE(s->known) << op << " was not found by the generator";
  }
  EXPECT_EQ(op_schema("aten.no_such_op.default"), nullptr);
}

TEST(RuleArgSchemas, TableIsWellFormed) {
  ASSERT_GT(all_op_schemas().size(), 200u);
  for (const auto& s : all_op_schemas()) {
    std::set<std::string> names;
    bool keyword = false;
    for (const auto& a : s.args) {
      EXPECT_TRUE(names.insert(a.name).second) << s.op << " lists argument " << a.name << " twice";
      EXPECT_FALSE(keyword && !a.kwarg_only) << s.op << ": positional " << a.name << " after keyword-only ones";
      keyword = keyword || a.kwarg_only;
      if (!a.has_default || a.dflt.is_null()) continue;
      // A default decodes as its type does.
      switch (a.kind) {
        case ArgKind::Int: EXPECT_TRUE(a.dflt.is_int()) << s.op << "." << a.name; break;
        case ArgKind::Bool: EXPECT_TRUE(a.dflt.is_bool()) << s.op << "." << a.name; break;
        case ArgKind::Float: case ArgKind::Scalar:
          EXPECT_TRUE(a.dflt.is_number() || a.dflt.is_object()) << s.op << "." << a.name;
          break;
        case ArgKind::IntList: EXPECT_TRUE(a.dflt.is_array() || a.dflt.is_int()) << s.op << "." << a.name; break;
        case ArgKind::Str: EXPECT_TRUE(a.dflt.is_string()) << s.op << "." << a.name; break;
        default: break;
      }
    }
  }
  const OpSchema* sum = op_schema("aten.sum.dim_IntList");
  ASSERT_NE(sum, nullptr);
  EXPECT_EQ(sum->index_of("keepdim"), 2);
  EXPECT_EQ(sum->args[1].kind, ArgKind::IntList);
  EXPECT_TRUE(sum->args[1].optional);
  EXPECT_TRUE(sum->args[3].kwarg_only);
}

TEST(RuleArgs, DecodesPositionalKeywordAndDefaultArguments) {
  Graph g = sum_graph("[$0, [1]]");
  RuleCtx c(g, op_id(g), op_node(g));
  EXPECT_EQ(c.int_list("dim"), (std::vector<int64_t>{1}));
  EXPECT_FALSE(c.flag("keepdim"));  // the schema's default
  EXPECT_FALSE(c.opt_int("dtype").has_value());
  EXPECT_FALSE(c.has("dtype"));
  EXPECT_TRUE(c.has("dim"));
  EXPECT_EQ(c.tensor("self"), 0);

  Graph kw = sum_graph("[$0]", R"({"dim": [0, -1], "keepdim": true})");
  RuleCtx k(kw, op_id(kw), op_node(kw));
  EXPECT_EQ(k.int_list("dim"), (std::vector<int64_t>{0, -1}));
  EXPECT_TRUE(k.flag("keepdim"));

  Graph none = sum_graph("[$0, null]");
  RuleCtx n(none, op_id(none), op_node(none));
  EXPECT_TRUE(n.int_list("dim").empty());
  EXPECT_FALSE(n.has("dim"));
}

TEST(RuleArgs, ScalarsTensorsAndIntScalars) {
  // add.Tensor(self, other, *, alpha=1): `other` a Python scalar is no tensor input.
  Graph g = one_op_graph({2}, {{{4}}}, "aten.add.Tensor", "[$0, 2.5]", {{{4}}});
  RuleCtx c(g, op_id(g), op_node(g));
  EXPECT_EQ(c.tensor("self"), 0);
  EXPECT_EQ(c.tensor("other"), -1);
  EXPECT_EQ(c.scalar("alpha"), 1.0);

  Graph inf = one_op_graph({2}, {{{4}}}, "aten.add.Tensor", "[$0, $0]", {{{4}}}, R"({"alpha": {"float": "-inf"}})");
  RuleCtx i(inf, op_id(inf), op_node(inf));
  EXPECT_EQ(i.tensor("other"), 1);
  EXPECT_LT(i.scalar("alpha"), -1e300);

  Graph ar = one_op_graph({2}, {}, "aten.arange.start_step", "[2, 10.0]", {{{8}}});
  RuleCtx a(ar, op_id(ar), op_node(ar));
  EXPECT_EQ(a.int_scalar("start"), std::optional<int64_t>(2));
  EXPECT_FALSE(a.int_scalar("end").has_value());  // a float
  EXPECT_EQ(a.int_scalar("step"), std::optional<int64_t>(1));  // the schema's default
  EXPECT_TRUE(a.schema_has("step"));
  EXPECT_FALSE(a.schema_has("stride"));
}

TEST(RuleArgs, ARuleReadingAnArgumentAgainstItsSchemaIsRefused) {
  Graph g = sum_graph("[$0, [1]]");
  RuleCtx c(g, op_id(g), op_node(g));
  const std::string wrong_type = error_of<RuleSchemaError>([&] { c.int_arg("dim"); });
  EXPECT_NE(wrong_type.find("reads argument 'dim' with int_arg"), std::string::npos) << wrong_type;
  EXPECT_NE(wrong_type.find("the schema types it int[]?"), std::string::npos) << wrong_type;
  const std::string unknown = error_of<RuleSchemaError>([&] { c.flag("keep_dim"); });
  EXPECT_NE(unknown.find("which the op's schema does not have (its arguments: self, dim, keepdim, dtype)"),
            std::string::npos)
      << unknown;
  EXPECT_NE(error_of<RuleSchemaError>([&] { c.scalar("keepdim"); }), "");
  EXPECT_NE(error_of<RuleSchemaError>([&] { c.with_args({{"dims", nullptr}}); }), "");
}

TEST(RuleArgs, AValueThatDoesNotFitItsTypeIsRefused) {
  Graph g = one_op_graph({2}, {{{4, 6}}}, "aten.transpose.int", R"([$0, "x", 1])", {{{6, 4}}});
  RuleCtx c(g, op_id(g), op_node(g));
  EXPECT_NE(error_of<InvalidArgument>([&] { c.int_arg("dim0"); }).find("argument 'dim0' is not an integer"),
            std::string::npos);
  Graph missing = one_op_graph({2}, {{{4, 6}}}, "aten.transpose.int", "[$0, 0]", {{{6, 4}}});
  RuleCtx m(missing, op_id(missing), op_node(missing));
  EXPECT_NE(error_of<InvalidArgument>([&] { m.int_arg("dim1"); }).find("argument 'dim1' (int) is missing or None"),
            std::string::npos);
}

TEST(RuleArgs, WithArgsKeepsPositionalArgumentsPositional) {
  Graph g = one_op_graph({2}, {{{4, 6}}}, "aten.view.default", "[$0, [24]]", {{{24}}});
  RuleCtx c(g, op_id(g), op_node(g));
  const json::Value v = c.with_args({{"size", std::vector<int64_t>{12}}});
  EXPECT_EQ(json::int_list(v.at("args").as_array()[1], "size"), (std::vector<int64_t>{12}));
  EXPECT_EQ(v.at("kwargs").size(), 0u);
  Graph kw = one_op_graph({2}, {{{4, 6}}}, "aten.view.default", "[$0]", {{{24}}}, R"({"size": [24]})");
  RuleCtx k(kw, op_id(kw), op_node(kw));
  const json::Value w = k.with_args({{"size", std::vector<int64_t>{12}}});
  EXPECT_EQ(w.at("args").size(), 1u);
  EXPECT_EQ(json::int_list(w.at("kwargs").at("size", "kwargs"), "size"), (std::vector<int64_t>{12}));
}

// A node of `op` built from its schema: each argument a value of its type (tensors
// 4x4), keyword-only ones with a default left out; `n_outputs` 4x4 outputs.
Graph node_from_schema(const OpSchema& s, int n_outputs) {
  std::vector<Input> inputs;
  auto tensor = [&] {
    inputs.push_back({{4, 4}});
    return "$" + std::to_string(inputs.size() - 1);
  };
  std::string args = "[", kwargs = "{";
  for (const auto& a : s.args) {
    if (a.kwarg_only && a.has_default) continue;
    std::string v;
    switch (a.kind) {
      case ArgKind::Tensor: v = tensor(); break;
      case ArgKind::TensorList: {
        const std::string t0 = tensor();
        v = "[" + t0 + "," + tensor() + "]";
      } break;
      case ArgKind::Int: v = a.name == "groups" ? "1" : "0"; break;
      case ArgKind::IntList: v = "[4,4]"; break;
      case ArgKind::Float: v = "0.0"; break;
      case ArgKind::Scalar: v = "1"; break;
      case ArgKind::Bool: v = "false"; break;
      case ArgKind::BoolList: v = "[true,true,true]"; break;
      case ArgKind::List: v = "[]"; break;
      case ArgKind::Subgraph: v = R"({"subgraph":"g"})"; break;
      case ArgKind::Str: v = R"("sum")"; break;
      case ArgKind::Other: v = "null"; break;
    }
    if (a.kwarg_only) kwargs += (kwargs.size() > 1 ? ",\"" : "\"") + a.name + "\":" + v;
    else args += (args.size() > 1 ? "," : "") + v;
  }
  return one_op_graph({2}, inputs, s.op, args + "]", std::vector<Input>(static_cast<size_t>(n_outputs), Input{{4, 4}}),
                      kwargs + "}");
}

// The schema audit, as verify-strategies runs it on traced programs but on nodes
// built from each op's schema: whatever a rule reads (strategies, work, per-rank
// call arguments) must be named and typed as the schema says. A rule may refuse
// the made-up node (InvalidArgument): only RuleSchemaError fails. Nodes get as many
// outputs as the op returns (1 and 3 where the count is not fixed); a rule meets
// any mismatch as an exception, so the audit runs in-process.
TEST(RuleArgs, EveryRuleReadsItsArgumentsAsTheSchemaSays) {
  int read = 0;
  std::vector<std::string> wrong;
  for (const auto& op : ops_with_rules()) {
    const OpSchema* s = op_schema(op);
    ASSERT_NE(s, nullptr) << op;
    bool op_read = false, op_wrong = false;
    const std::vector<int> counts = s->returns ? std::vector<int>{*s->returns} : std::vector<int>{1, 3};
    for (int n_outputs : counts) {
      Graph g = node_from_schema(*s, n_outputs);
      const int id = op_id(g);
      set_arg_audit(true);
      try {
        for (const auto& st : enumerate_strategies(g, id, StrategyOptions{}).strategies) {
          op_work(g, id, st);
          local_call_args(g, id, st, {1});
        }
      } catch (const RuleSchemaError& e) {
        std::fprintf(stderr, "%s\n", e.what());
        op_wrong = true;
      } catch (const std::exception&) {
        // the made-up node does not suit the rule: it read what it reads up to here
      }
      const auto records = arg_audit_records();
      set_arg_audit(false);
      for (const auto& r : records)
        op_wrong = op_wrong || r.op != s->op || r.pos >= s->args.size() || s->args[r.pos].name != r.name;
      op_read = op_read || !records.empty();
    }
    if (op_wrong) wrong.push_back(op);
    read += op_read && !op_wrong;
  }
  EXPECT_TRUE(wrong.empty()) << wrong.size() << " rule(s) read arguments against their schema (messages above), e.g. "
                             << (wrong.empty() ? "" : wrong[0]);
  EXPECT_GT(read, 90) << "the audit ran too few rules' reads";
  std::printf("%d ops' rules read arguments\n", read);
}

// A node whose outputs do not match its op is refused with InvalidArgument when its
// rule context is made: the loss rule writes its second output's row entry, and a
// 1-output nll_loss_forward once sent it past the row (heap corruption).
TEST(RuleArgs, ANodeWithTheWrongNumberOfOutputsIsRefused) {
  const OpSchema* nll = op_schema("aten.nll_loss_forward.default");
  ASSERT_NE(nll, nullptr);
  ASSERT_EQ(nll->returns, std::optional<int>(2));
  EXPECT_FALSE(op_schema("aten.split.Tensor")->returns.has_value());  // Tensor[]: no fixed count

  // (self, target, weight, reduction, ignore_index) with one output instead of (output, total_weight).
  Graph g = one_op_graph({2}, {{{4, 6}}, {{4}, "int64"}}, "aten.nll_loss_forward.default", "[$0, $1, null, 1, -100]",
                         {{{}}});
  const std::string refused = error_of<InvalidArgument>([&] { RuleCtx c(g, op_id(g), op_node(g)); });
  EXPECT_NE(refused.find("node '"), std::string::npos) << refused;
  EXPECT_NE(refused.find("(aten.nll_loss_forward.default): has 1 output, but the op returns 2"), std::string::npos)
      << refused;
  EXPECT_NE(error_of<InvalidArgument>([&] { enumerate_strategies(g, op_id(g), StrategyOptions{}); }), "");

  Graph ok = one_op_graph({2}, {{{4, 6}}, {{4}, "int64"}}, "aten.nll_loss_forward.default", "[$0, $1, null, 1, -100]",
                          {{{}}, {{}}});
  EXPECT_FALSE(enumerate_strategies(ok, op_id(ok), StrategyOptions{}).strategies.empty());
}

TEST(RuleArgs, OutputPositionsMustFitTheOpsReturns) {
  // native_layer_norm_backward drops absent gradients: positions [0, 2] of 3 are fine.
  const std::string args = "[$0, $0, [6], $1, $1, $2, $2, [true, false, true]]";
  const std::vector<Input> in = {{{4, 6}}, {{4, 1}}, {{6}}};
  Graph g = one_op_graph({2}, in, "aten.native_layer_norm_backward.default", args, {{{4, 6}}, {{6}}});
  auto with_positions = [&](const char* positions) {
    Graph h = g;
    h.nodes[static_cast<size_t>(op_id(h))].extra = json::parse(std::string(R"({"output_positions": )") + positions + "}");
    return error_of<InvalidArgument>([&] { RuleCtx c(h, op_id(h), op_node(h)); });
  };
  EXPECT_EQ(with_positions("[0, 2]"), "");
  EXPECT_NE(with_positions("[0, 3]").find("output position 3 is not valid: expected distinct increasing positions "
                                          "below 3"),
            std::string::npos);
  EXPECT_NE(with_positions("[2, 0]"), "");
  EXPECT_NE(with_positions("[0]").find("has 2 outputs but 1 output_positions"), std::string::npos);
}

TEST(RuleArgs, ReadingAnInputOrOutputPastTheNodeIsRefused) {
  Graph g = sum_graph("[$0, [1]]");
  RuleCtx c(g, op_id(g), op_node(g));
  EXPECT_EQ(c.in(0).shape, (std::vector<int64_t>{4, 6}));
  EXPECT_NE(error_of<InvalidArgument>([&] { c.in(1); }).find("the rule reads input 1, but the node has 1 tensor input"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { c.out(1); }).find("the rule reads output 1, but the node has 1 tensor output"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>([&] { c.out(-1); }), "");
}
