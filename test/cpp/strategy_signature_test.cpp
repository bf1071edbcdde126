#include "core/strategy_signature.h"

#include <gtest/gtest.h>

#include <string>

#include "core/cost_model.h"
#include "core/cost_tables.h"
#include "core/strategy.h"
#include "strategy_test_util.h"

namespace tlm {
namespace {

std::string placeholder(const std::string& name, const std::string& shape) {
  return R"({"name":")" + name + R"(","op":"placeholder","role":"input","outputs":[{"shape":)" + shape +
         R"(,"dtype":"float32"}]},)";
}

std::string call(const std::string& name, const std::string& op, const std::string& args, const std::string& shape,
                 const std::string& extra = "") {
  return R"({"name":")" + name + R"(","op":")" + op + R"(","args":)" + args +
         R"(,"kwargs":{},"outputs":[{"shape":)" + shape + R"(,"dtype":"float32"}])" +
         (extra.empty() ? "" : R"(,"extra":)" + extra) + "},";
}

std::string ref(int node) { return R"({"t":[)" + std::to_string(node) + ",0]}"; }

// Two identical layers (mm then relu) over inputs of equal metas, the second layer's first
// op tagged with another block; mul(x, x) beside mul(x, y); an mm of another shape.
Graph layered_graph() {
  std::string nodes = placeholder("x", "[8,16]") + placeholder("w1", "[16,16]") + placeholder("w2", "[16,16]") +
                      placeholder("y", "[8,16]") + placeholder("w3", "[16,32]");
  nodes += call("mm1", "aten.mm.default", "[" + ref(0) + "," + ref(1) + "]", "[8,16]", R"({"block":"layers.0"})");  // 5
  nodes += call("relu1", "aten.relu.default", "[" + ref(5) + "]", "[8,16]");                                        // 6
  nodes += call("mm2", "aten.mm.default", "[" + ref(6) + "," + ref(2) + "]", "[8,16]", R"({"block":"layers.1"})");  // 7
  nodes += call("relu2", "aten.relu.default", "[" + ref(7) + "]", "[8,16]");                                        // 8
  nodes += call("sq", "aten.mul.Tensor", "[" + ref(0) + "," + ref(0) + "]", "[8,16]");                             // 9
  nodes += call("xy", "aten.mul.Tensor", "[" + ref(0) + "," + ref(3) + "]", "[8,16]");                             // 10
  nodes += call("wide", "aten.mm.default", "[" + ref(0) + "," + ref(4) + "]", "[8,32]");                           // 11
  nodes += R"({"name":"output","op":"output","args":[[)" + ref(8) + "," + ref(9) + "," + ref(10) + "," + ref(11) +
           "]]}";
  return read_graph(R"({"mesh":{"shape":[2,2]},"nodes":[)" + nodes + "]}");
}

TEST(StrategySignature, RepeatedOpsOnEqualMetasAreEnumeratedOnceAndCopied) {
  const Graph g = layered_graph();
  const std::vector<NodeStrategies> s = enumerate_graph_strategies(g);
  EXPECT_EQ(s[5].same_as, -1);
  EXPECT_EQ(s[6].same_as, -1);
  EXPECT_EQ(s[7].same_as, 5);  // the block name is not part of the signature
  EXPECT_EQ(s[8].same_as, 6);
  EXPECT_EQ(test::render_all(s[7]), test::render_all(s[5]));
  EXPECT_EQ(test::render_all(s[8]), test::render_all(s[6]));
  EXPECT_EQ(s[7].family, s[5].family);
}

TEST(StrategySignature, ARepeatedInputOrAnotherShapeIsAnotherSignature) {
  const Graph g = layered_graph();
  const std::vector<NodeStrategies> s = enumerate_graph_strategies(g);
  EXPECT_EQ(s[10].same_as, -1);  // mul(x, y) is not mul(x, x): a rule may treat a repeated input alike
  EXPECT_EQ(s[11].same_as, -1);  // another output shape
  const std::vector<uint8_t> none(2, 0);
  EXPECT_NE(strategy_signature(g, 9, none), strategy_signature(g, 10, none));
  EXPECT_NE(strategy_signature(g, 5, none), strategy_signature(g, 5, {0, 1}));  // what partial kinds can arrive
  EXPECT_EQ(strategy_signature(g, 0, {}), "");  // placeholders are never copied
}

TEST(StrategySignature, CopiedNodesArePricedAsTheirOriginal) {
  const Graph g = layered_graph();
  const std::vector<NodeStrategies> s = enumerate_graph_strategies(g);
  const CostModel cm = make_cost_model("H100");
  CostTables t(cm, g.mesh);
  build_cost_tables(g, s, cm, BoundaryPolicy{}, std::nullopt, /*materialize_edges=*/true, t);
  for (const auto& [copy, original] : {std::pair{7, 5}, std::pair{8, 6}}) {
    const auto& a = t.problem.nodes[static_cast<size_t>(copy)].strategies;
    const auto& b = t.problem.nodes[static_cast<size_t>(original)].strategies;
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].cost, b[k].cost);
      EXPECT_EQ(a[k].usage, b[k].usage);
      // ...and as a fresh pricing of the copy's own strategy would (op_work reads only the node)
      const double fresh = cm.compute_seconds(op_work(g, copy, s[static_cast<size_t>(copy)].strategies[k]),
                                              DType::Float32);
      EXPECT_EQ(a[k].cost, to_cost(fresh));
    }
  }
}

}  // namespace
}  // namespace tlm
