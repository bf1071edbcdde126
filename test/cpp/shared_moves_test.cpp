// Moves the rank program makes once for every reader (shared_moves.h): only where all
// readers take the value in one spec and the move gathers nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/graph.h"
#include "core/placement.h"
#include "core/plan.h"
#include "core/shared_moves.h"

using namespace tlm;

namespace {

// x [8, 8]; y = x * x (x read twice); z = -y; outputs (y, None, z): y is read by z and by
// the graph's first output.
Graph readers_graph() {
  const std::string t = R"({"shape": [8, 8], "dtype": "float32"})";
  return read_graph(R"({"mesh": {"shape": [4]}, "nodes": [
    {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [)" + t + R"(]},
    {"name": "y", "op": "aten.mul.Tensor", "args": [{"t": [0, 0]}, {"t": [0, 0]}], "outputs": [)" + t + R"(]},
    {"name": "z", "op": "aten.neg.default", "args": [{"t": [1, 0]}], "outputs": [)" + t + R"(]},
    {"name": "output", "op": "output", "args": [[{"t": [1, 0]}, null, {"t": [2, 0]}]],
     "extra": {"roles": ["output", "output", "output"], "targets": ["0", "1", "2"]}}]})");
}

PlannedNode node(std::vector<std::string> inputs, std::vector<std::string> outputs) {
  PlannedNode n;
  for (const std::string& s : inputs) n.strategy.inputs.push_back(s.empty() ? PlacementSpec{} : parse_spec(s));
  for (const std::string& s : outputs) n.strategy.outputs.push_back(parse_spec(s));
  return n;
}

// x made in `x_spec` and read by y in `y_in`; y made in `y_spec`, read by z in `z_in` and
// by the first graph output in `out0`.
Plan plan_of(const std::string& x_spec, const std::vector<std::string>& y_in, const std::string& y_spec,
             const std::string& z_in, const std::string& out0) {
  Plan p;
  p.nodes = {node({}, {x_spec}), node(y_in, {y_spec}), node({z_in}, {z_in}), node({out0, "", z_in}, {})};
  return p;
}

std::vector<std::string> spelled(const std::vector<SharedMove>& moves) {
  std::vector<std::string> out;
  for (const SharedMove& m : moves)
    out.push_back(std::to_string(m.value.node) + ":" + std::to_string(m.value.output) + " " + to_string(m.to));
  return out;
}

}  // namespace

TEST(SharedMoves, AReductionEveryReaderTakesAlikeIsMadeOnce) {
  const Graph g = readers_graph();
  // y is Partial; z and the output both want it whole: one all-reduce for both.
  EXPECT_EQ(spelled(shared_moves(g, plan_of("R", {"R", "R"}, "P(sum)", "R", "R"))),
            std::vector<std::string>{"1:0 R"});
  // One node reading x twice, both sliced the same way: one slice.
  EXPECT_EQ(spelled(shared_moves(g, plan_of("R", {"S(0)", "S(0)"}, "S(0)", "S(0)", "S(0)"))),
            std::vector<std::string>{"0:0 S(0)"});
  // An all-to-all keeps the pieces' size.
  EXPECT_EQ(spelled(shared_moves(g, plan_of("S(1)", {"S(0)", "S(0)"}, "S(0)", "S(0)", "S(0)"))),
            std::vector<std::string>{"0:0 S(0)"});
}

TEST(SharedMoves, GathersDifferentSpecsAndLoneReadersMovePerReader) {
  const Graph g = readers_graph();
  // A gather would hold the whole value until the last reader: per reader, as priced.
  EXPECT_TRUE(shared_moves(g, plan_of("S(0)", {"R", "R"}, "P(sum)", "P(sum)", "P(sum)")).empty());
  // Readers wanting different specs.
  EXPECT_TRUE(shared_moves(g, plan_of("R", {"R", "S(0)"}, "P(sum)", "R", "S(0)")).empty());
  // Nothing moves: every reader takes the value as made.
  EXPECT_TRUE(shared_moves(g, plan_of("R", {"R", "R"}, "R", "R", "R")).empty());
  // z is read once (by the graph's last output): nothing to share.
  Plan p = plan_of("R", {"R", "R"}, "R", "R", "R");
  p.nodes[2].strategy.outputs = {parse_spec("P(sum)")};
  EXPECT_TRUE(shared_moves(g, p).empty());
  // A value backward recomputes is not held from forward: a shared copy would be.
  p = plan_of("R", {"R", "R"}, "P(sum)", "R", "R");
  p.nodes[1].recompute = true;
  EXPECT_TRUE(shared_moves(g, p).empty());
}

TEST(SharedMoves, APlanOfAnotherGraphIsRefused) {
  const Graph g = readers_graph();
  Plan p = plan_of("R", {"R", "R"}, "P(sum)", "R", "R");
  p.nodes.pop_back();
  EXPECT_THROW(shared_moves(g, p), InvalidArgument);
}
