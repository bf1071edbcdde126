// core/recompute.h: keeping or recomputing values backward reads, chosen by the solver.
#include <gtest/gtest.h>

#include "core/memory_estimate.h"
#include "core/planner.h"
#include "core/recompute.h"
#include "core/solver/solver.h"

using namespace tlm;

namespace {

// Graphs of one rank over two placeholders, w (param, 0) and x (input, 1), each value a
// 64 x 64 float32 tile (T) or a scalar (S); a node marked backward carries the IR's mark.
const std::string T = R"({"shape": [64, 64], "dtype": "float32"})";
const std::string S = R"({"shape": [], "dtype": "float32"})";

std::string ir_node(const char* name, const char* op, const char* args, const std::string& out, bool bwd) {
  return std::string(R"({"name": ")") + name + R"(", "op": ")" + op + R"(", "args": )" + args +
         R"(, "outputs": [)" + out + "]" + (bwd ? R"(, "extra": {"backward": true}})" : "}");
}

// The document around `nodes` (comma-separated, after w and x): `loss` and `grad` are the
// node indices of the loss and of w's gradient.
std::string one_rank_graph(const std::string& nodes, int loss, int grad) {
  return R"({"mesh": {"shape": [1]}, "nodes": [
    {"name": "w", "op": "placeholder", "role": "param", "extra": {"target": "w"}, "outputs": [)" + T + R"(]},
    {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [)" + T + R"(]},)" +
         nodes + R"(, {"name": "output", "op": "output", "args": [[{"t": [)" + std::to_string(loss) +
         R"(, 0]}, {"t": [)" + std::to_string(grad) + R"(, 0]}]],
             "extra": {"roles": ["output", "grad"], "targets": ["0", "w"]}}]})";
}

// One rank. Forward: a = x @ w, b = a * a, loss = sum(b @ w). Backward (marked): a large
// d = x @ w and d * d while a and b wait, then e = x * b, f = e * a, gw = x @ f.
// Each value is 64 x 64 float32 (16 KiB); w and its two optimizer states 48 KiB.
// Keeping everything peaks at 128 KiB + 4 bytes when d * d is made (w, x, a, b, d, d*d);
// recomputing a or b frees it over that span (112 KiB), which a limit of 115 KiB needs.
std::string graph() {
  return one_rank_graph(ir_node("a", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [0, 0]}])", T, false) + "," +
                        ir_node("b", "aten.mul.Tensor", R"([{"t": [2, 0]}, {"t": [2, 0]}])", T, false) + "," +
                        ir_node("c", "aten.mm.default", R"([{"t": [3, 0]}, {"t": [0, 0]}])", T, false) + "," +
                        ir_node("loss", "aten.sum.default", R"([{"t": [4, 0]}])", S, false) + "," +
                        ir_node("d", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [0, 0]}])", T, true) + "," +
                        ir_node("dd", "aten.mul.Tensor", R"([{"t": [6, 0]}, {"t": [6, 0]}])", T, true) + "," +
                        ir_node("sd", "aten.sum.default", R"([{"t": [7, 0]}])", S, true) + "," +
                        ir_node("e", "aten.mul.Tensor", R"([{"t": [1, 0]}, {"t": [3, 0]}])", T, true) + "," +
                        ir_node("f", "aten.mul.Tensor", R"([{"t": [9, 0]}, {"t": [2, 0]}])", T, true) + "," +
                        ir_node("gw", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [10, 0]}])", T, true),
                        5, 11);
}

constexpr int64_t kLimit = 115 * 1024;

PlanOptions options(bool recompute) {
  PlanOptions o;
  o.memory_limit_bytes = kLimit;
  o.recompute = recompute;
  o.time_limit_s = 5;
  return o;
}

}  // namespace

TEST(Recompute, CandidatesAreForwardValuesBackwardReadsAfterAGap) {
  const Graph g = read_graph(graph());
  std::vector<NodeStrategies> strat;
  for (int i = 0; i + 1 < static_cast<int>(g.nodes.size()); ++i) strat.push_back(enumerate_strategies(g, i, {}));
  strat.emplace_back();  // the output node has no strategies
  // a and b: read by backward after their forward use. c and loss: forward only; d..gw: backward.
  EXPECT_EQ(recompute_candidates(g, strat), (std::vector<int>{2, 3}));
}

TEST(Recompute, MakesAnInfeasibleLimitFeasible) {
  const Graph g = read_graph(graph());
  EXPECT_THROW(plan_graph(g, options(false)), solver::InfeasibleError);
  const Plan plan = plan_graph(g, options(true));
  ASSERT_TRUE(plan.nodes[2].recompute || plan.nodes[3].recompute) << "a or b must be recomputed to fit";
  EXPECT_GT(plan.summary.recompute_s, 0);
  EXPECT_LE(plan.summary.peak_bytes, kLimit);
  EXPECT_LE(plan.summary.memory.peak, kLimit);  // the per-kind estimate agrees: b made again at e
  EXPECT_NEAR(plan.summary.estimated_step_s,
              plan.summary.compute_s + plan.summary.comm_s + plan.summary.recompute_s, 1e-15);
}

TEST(Recompute, NothingIsRecomputedWithoutMemoryPressure) {
  const Graph g = read_graph(graph());
  PlanOptions o = options(true);
  o.memory_unlimited = true;
  const Plan plan = plan_graph(g, o);
  for (const PlannedNode& n : plan.nodes) EXPECT_FALSE(n.recompute) << n.name;
  EXPECT_EQ(plan.summary.recompute_s, 0);
}

TEST(Recompute, EstimateCountsARecomputedValueTwice) {
  const Graph g = read_graph(graph());
  std::vector<OpStrategy> rep(g.nodes.size());
  for (size_t i = 0; i + 1 < g.nodes.size(); ++i) {
    rep[i].outputs = {parse_spec("R")};
    rep[i].inputs.assign(g.nodes[i].tensor_inputs.size(), parse_spec("R"));
  }
  rep.back().inputs = {parse_spec("R"), parse_spec("R")};
  std::vector<char> b_only(g.nodes.size(), 0), a_and_b(g.nodes.size(), 0);
  b_only[3] = a_and_b[2] = a_and_b[3] = 1;
  const int64_t kept = estimate_memory(g, rep, 2).peak;
  const int64_t state = 3 * 64 * 64 * 4;
  EXPECT_EQ(kept, state + 5 * 64 * 64 * 4 + 4);  // w x3, then x a b d dd and the loss
  EXPECT_EQ(estimate_memory(g, rep, 2, b_only).peak, kept - 64 * 64 * 4);
  // a is made again with b (recomputing b reads it), so at e both are back: no lower than b alone.
  EXPECT_EQ(estimate_memory(g, rep, 2, a_and_b).peak, kept - 64 * 64 * 4);
  EXPECT_THROW(estimate_memory(g, rep, 2, std::vector<char>(3, 0)), InvalidArgument);
}

namespace {

// Forward: m = x @ w, v = view(m), loss = sum(v); backward reads v (not m) after a large
// d * d: recomputing v needs m made again too (its closure), and fits 100 KiB.
std::string view_graph() {
  return one_rank_graph(ir_node("m", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [0, 0]}])", T, false) + "," +
                        ir_node("v", "aten.view.default", R"([{"t": [2, 0]}, [64, 64]])", T, false) + "," +
                        ir_node("loss", "aten.sum.default", R"([{"t": [3, 0]}])", S, false) + "," +
                        ir_node("d", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [0, 0]}])", T, true) + "," +
                        ir_node("dd", "aten.mul.Tensor", R"([{"t": [5, 0]}, {"t": [5, 0]}])", T, true) + "," +
                        ir_node("sd", "aten.sum.default", R"([{"t": [6, 0]}])", S, true) + "," +
                        ir_node("e", "aten.mul.Tensor", R"([{"t": [1, 0]}, {"t": [3, 0]}])", T, true) + "," +
                        ir_node("gw", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [8, 0]}])", T, true),
                        4, 9);
}

}  // namespace

TEST(Recompute, AValueIsRecomputedWithTheInputsBackwardDoesNotKeep) {
  const Graph g = read_graph(view_graph());
  PlanOptions o;
  o.memory_limit_bytes = 100 * 1024;
  o.time_limit_s = 5;
  EXPECT_THROW(plan_graph(g, o), solver::InfeasibleError);
  o.recompute = true;
  const Plan plan = plan_graph(g, o);
  EXPECT_TRUE(plan.nodes[3].recompute) << "v must be recomputed to fit";
  EXPECT_TRUE(plan.nodes[2].recompute) << "and the matmul it views with it";
  EXPECT_GT(plan.nodes[2].recompute_s, 0);  // the matmul's compute, paid again
  EXPECT_LE(plan.summary.memory.peak, 100 * 1024);
}
