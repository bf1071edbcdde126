// core/recompute.h: keeping or recomputing values backward reads, chosen by the solver.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

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

namespace {

// A chain as a residual stream makes it: a_1 = x @ w, a_i = a_(i-1) * a_(i-1) up to a_n,
// loss = sum(a_n); backward reads them last first: g_n = a_n * a_n, g_i = g_(i+1) * a_i,
// gw = x @ g_1.
// `block` > 0: a_i belongs to block "layers.(i / block)" (IR extra.block), as a stack of
// layers of `block` values each.
std::string chain_graph(int n, int block = 0) {
  std::string nodes = ir_node("a1", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [0, 0]}])", T, false);
  auto ref = [](int node) { return R"({"t": [)" + std::to_string(node) + ", 0]}"; };
  for (int i = 2; i <= n; ++i) {  // a_i is IR node i + 1
    std::string a = ir_node(("a" + std::to_string(i)).c_str(), "aten.mul.Tensor",
                            ("[" + ref(i) + ", " + ref(i) + "]").c_str(), T, false);
    if (block > 0) a.insert(a.size() - 1, R"(, "extra": {"block": "layers.)" + std::to_string(i / block) + "\"}");
    nodes += "," + a;
  }
  const int loss = n + 2;
  nodes += "," + ir_node("loss", "aten.sum.default", ("[" + ref(n + 1) + "]").c_str(), S, false);
  nodes += "," + ir_node("gn", "aten.mul.Tensor", ("[" + ref(n + 1) + ", " + ref(n + 1) + "]").c_str(), T, true);
  int prev = loss + 1;
  for (int i = n - 1; i >= 1; --i, ++prev)
    nodes += "," + ir_node(("g" + std::to_string(i)).c_str(), "aten.mul.Tensor",
                           ("[" + ref(prev) + ", " + ref(i + 1) + "]").c_str(), T, true);
  nodes += "," + ir_node("gw", "aten.mm.default", ("[" + ref(1) + ", " + ref(prev) + "]").c_str(), T, true);
  return one_rank_graph(nodes, loss, prev + 1);
}

}  // namespace

TEST(Recompute, LongChainsAreCutIntoSegments) {
  const int n = 64;
  const Graph g = read_graph(chain_graph(n));
  std::vector<NodeStrategies> strat;
  for (int i = 0; i + 1 < static_cast<int>(g.nodes.size()); ++i) strat.push_back(enumerate_strategies(g, i, {}));
  strat.emplace_back();
  const std::vector<int> all = recompute_candidates(g, strat);
  ASSERT_EQ(all.size(), static_cast<size_t>(n - 1));  // a_1 .. a_(n-1); a_n is read by backward at once
  const std::vector<ValueUses> uses = value_uses(g);
  auto remade = [&](const std::vector<int>& set) {
    std::vector<char> on(g.nodes.size(), 0);
    for (int a : set) on[static_cast<size_t>(a)] = 1;
    return remade_at(g, uses, on);
  };
  // Every candidate recomputed: each is made again when the one after it is, so all at
  // backward's start, where recomputing frees nothing.
  const std::vector<int> pulled = remade(all);
  EXPECT_EQ(pulled[static_cast<size_t>(all.front())], uses[static_cast<size_t>(all.back())].first_backward);
  // Cut: some values are kept, and no candidate left is pulled more than the window
  // (2 sqrt(backward's n + 1 nodes)) before its own first backward read.
  const std::vector<int> cut = cut_long_chains(g, strat, all);
  EXPECT_LT(cut.size(), all.size());
  EXPECT_GT(cut.size(), all.size() / 2);
  const int window = static_cast<int>(2.0 * std::sqrt(static_cast<double>(n + 1)));
  const std::vector<int> at = remade(cut);
  for (int a : cut) EXPECT_GE(at[static_cast<size_t>(a)], uses[static_cast<size_t>(a)].first_backward - window) << a;
}

TEST(Recompute, RepeatedBlocksAreCutAlike) {
  const int n = 64, block = 4;
  const Graph g = read_graph(chain_graph(n, block));
  std::vector<NodeStrategies> strat;
  for (int i = 0; i + 1 < static_cast<int>(g.nodes.size()); ++i) strat.push_back(enumerate_strategies(g, i, {}));
  strat.emplace_back();
  const std::vector<int> all = recompute_candidates(g, strat);
  const std::vector<int> cut = cut_long_chains(g, strat, all);
  ASSERT_LT(cut.size(), all.size());
  // a_i is node i + 1 and sits at place i % block of layers.(i / block): whole blocks
  // (layers 1 .. 14, all of whose values are candidates) keep the same places.
  std::set<int> kept(cut.begin(), cut.end());
  std::vector<std::set<int>> places(n / block);
  for (int i = 2; i <= n; ++i)
    if (kept.count(i + 1)) places[static_cast<size_t>(i / block)].insert(i % block);
  for (int layer = 2; layer + 1 < n / block; ++layer) EXPECT_EQ(places[static_cast<size_t>(layer)], places[1]) << layer;
  const std::vector<ValueUses> uses = value_uses(g);
  std::vector<char> on(g.nodes.size(), 0);
  for (int a : cut) on[static_cast<size_t>(a)] = 1;
  const std::vector<int> at = remade_at(g, uses, on);
  const int window = static_cast<int>(2.0 * std::sqrt(static_cast<double>(n + 1)));
  for (int a : cut) EXPECT_GE(at[static_cast<size_t>(a)], uses[static_cast<size_t>(a)].first_backward - window) << a;
}

namespace {

// On 2 ranks: wt = t(w) (made from the parameter alone), a = x @ wt, b = a * a; backward
// reads wt, a and b after a gap (the shape of graph() with the weight transposed first).
std::string transposed_weight_graph() {
  std::string g = one_rank_graph(ir_node("wt", "aten.t.default", R"([{"t": [0, 0]}])", T, false) + "," +
                                 ir_node("a", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [2, 0]}])", T, false) + "," +
                                 ir_node("b", "aten.mul.Tensor", R"([{"t": [3, 0]}, {"t": [3, 0]}])", T, false) + "," +
                                 ir_node("loss", "aten.sum.default", R"([{"t": [4, 0]}])", S, false) + "," +
                                 ir_node("d", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [2, 0]}])", T, true) + "," +
                                 ir_node("e", "aten.mul.Tensor", R"([{"t": [1, 0]}, {"t": [4, 0]}])", T, true) + "," +
                                 ir_node("f", "aten.mul.Tensor", R"([{"t": [7, 0]}, {"t": [3, 0]}])", T, true) + "," +
                                 ir_node("gw", "aten.mm.default", R"([{"t": [1, 0]}, {"t": [8, 0]}])", T, true),
                                 5, 9);
  const std::string one = R"("shape": [1])";
  g.replace(g.find(one), one.size(), R"("shape": [2])");
  return g;
}

}  // namespace

TEST(Recompute, AParametersGatherIsFreeAndAnActivationsMoveIsPaidAgainWhenRecomputing) {
  // A value whose input comes from parameters alone may be recomputed with that input
  // moved for free (a gather backward makes anyway); one whose input is an activation
  // that needs a move pays that move again (backward issues the collective again).
  const Graph g = read_graph(transposed_weight_graph());
  const CostModel cm = make_cost_model("H100");
  const std::vector<NodeStrategies> strategies = enumerate_graph_strategies(g);
  BoundaryPolicy policy;
  policy.recompute = true;
  CostTables t(cm, g.mesh);
  build_cost_tables(g, strategies, cm, policy, std::nullopt, true, t);
  int hold_a = -1, hold_b = -1;
  for (const RecomputeSite& s : t.recompute) {
    if (s.node == 3) hold_a = s.hold;
    if (s.node == 4) hold_b = s.hold;
  }
  ASSERT_GE(hold_a, 0);
  ASSERT_GE(hold_b, 0);
  auto edge = [&](int u, int v) -> const solver::Edge* {
    for (const solver::Edge& e : t.problem.edges)
      if (e.u == u && e.v == v) return &e;
    return nullptr;
  };
  const solver::Edge* wt_hold = edge(2, hold_a);
  const solver::Edge* wt_a = edge(2, 3);
  const solver::Edge* a_hold = edge(3, hold_b);
  const solver::Edge* a_b = edge(3, 4);
  ASSERT_NE(wt_hold, nullptr) << "an edge from wt to a's hold node";
  ASSERT_NE(a_hold, nullptr) << "an edge from a to b's hold node";
  ASSERT_NE(wt_a, nullptr);
  ASSERT_NE(a_b, nullptr);
  // hold column 2s keeps (free), 2s + 1 recomputes under s: the plain edge's move, or 0 for a gather.
  auto check = [&](const solver::Edge& hold_edge, const solver::Edge& plain, bool of_state) {
    const size_t S = t.problem.nodes[static_cast<size_t>(plain.v)].strategies.size();
    const size_t X = t.problem.nodes[static_cast<size_t>(plain.u)].strategies.size();
    ASSERT_EQ(hold_edge.costs->size(), X * 2 * S);
    bool any_move = false;
    for (size_t x = 0; x < X; ++x)
      for (size_t s = 0; s < S; ++s) {
        const solver::Cost move = (*plain.costs)[x * S + s];
        any_move |= move > 0;
        EXPECT_EQ((*hold_edge.costs)[x * 2 * S + 2 * s], 0);
        EXPECT_EQ((*hold_edge.costs)[x * 2 * S + 2 * s + 1], of_state ? 0 : move);
      }
    EXPECT_TRUE(any_move) << "the plain edge moves somewhere, so the recompute column is a real choice";
  };
  check(*wt_hold, *wt_a, true);
  check(*a_hold, *a_b, false);
}
