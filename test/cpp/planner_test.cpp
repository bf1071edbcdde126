#include <gtest/gtest.h>

#include "core/cost_model.h"
#include "core/plan_json.h"
#include "core/planner.h"
#include "core/solver/solver.h"
#include "planner_test_util.h"

using namespace tlm;
using tlm_test::training_graph;

namespace {

const json::Value& node(const json::Value& plan, size_t i) { return plan.at("nodes").as_array().at(i); }
std::string out_spec(const json::Value& plan, size_t i) {
  return node(plan, i).at("strategy").at("outputs").as_array().at(0).as_string();
}
std::string final_spec(const json::Value& plan, size_t j) {
  return node(plan, 6).at("strategy").at("inputs").as_array().at(j).as_string();
}

}  // namespace

TEST(Planner, GradientLeavesInItsParametersSpecAndLossLeavesReplicated) {
  Graph g = read_graph(training_graph(8192, "[4]"));
  json::Value plan = plan_to_json(plan_graph(g, PlanOptions{}));
  EXPECT_EQ(final_spec(plan, 0), "R");
  EXPECT_EQ(final_spec(plan, 1), out_spec(plan, 0));  // grad of w in w's spec
  EXPECT_EQ(out_spec(plan, 1), "R");                  // inputs arrive replicated
  const auto& s = plan.at("summary");
  EXPECT_NEAR(s.at("estimated_step_s").as_double(), s.at("compute_s").as_double() + s.at("comm_s").as_double(),
              1e-15);
  EXPECT_LE(s.at("solver").at("gap").as_double(), 1e-9);
}

TEST(Planner, LargeMatmulIsShardedOnFourRanks) {
  // 2 * 8192^3 FLOP per mm: far above any collective of the 256 MiB operands on NVLink.
  Graph g = read_graph(training_graph(8192, "[4]"));
  json::Value plan = plan_to_json(plan_graph(g, PlanOptions{}));
  EXPECT_NE(out_spec(plan, 2), "R") << plan.dump();
  EXPECT_LT(plan.at("summary").at("compute_s").as_double(),
            node(plan, 2).at("compute_s").as_double() * 4 * 2);  // work was divided
}

TEST(Planner, FixedParametersArePinned) {
  Graph g = read_graph(training_graph(512, "[2, 2]"));
  PlanOptions opt;
  opt.fixed_params["w"] = parse_spec("S(1)S(0)");
  json::Value plan = plan_to_json(plan_graph(g, opt));
  EXPECT_EQ(out_spec(plan, 0), "S(1)S(0)");
  EXPECT_EQ(final_spec(plan, 1), "S(1)S(0)");
  opt.fixed_params["w"] = parse_spec("S(2)R");
  EXPECT_THROW(plan_graph(g, opt), InvalidArgument);
  opt.fixed_params.clear();
  opt.fixed_params["v"] = parse_spec("RR");
  EXPECT_THROW(plan_graph(g, opt), InvalidArgument);
}

TEST(Planner, CompileModeKeepsEveryBoundaryReplicated) {
  Graph g = read_graph(training_graph(8192, "[4]"));
  PlanOptions opt;
  opt.mode = "compile";
  json::Value plan = plan_to_json(plan_graph(g, opt));
  EXPECT_EQ(out_spec(plan, 0), "R");
  EXPECT_EQ(final_spec(plan, 0), "R");
  EXPECT_EQ(final_spec(plan, 1), "R");
}

TEST(Planner, ImpossibleMemoryLimitIsReported) {
  Graph g = read_graph(training_graph(512, "[2]"));
  PlanOptions opt;
  opt.memory_limit_bytes = 1024;  // one 512x512 float32 shard alone is 512 KiB
  EXPECT_THROW(plan_graph(g, opt), std::invalid_argument);
}

TEST(Planner, PlanIsDeterministic) {
  Graph g = read_graph(training_graph(1024, "[2, 2]"));
  EXPECT_EQ(plan_to_json(plan_graph(g, PlanOptions{})).at("nodes").dump(),
            plan_to_json(plan_graph(g, PlanOptions{})).at("nodes").dump());
}

TEST(Planner, RankCallArgsCoverEveryNode) {
  Graph g = read_graph(training_graph(6, "[4]"));
  json::Value plan = plan_to_json(plan_graph(g, PlanOptions{}));
  json::Value args = rank_call_args(g, plan_from_json(plan), {3});
  ASSERT_EQ(args.size(), g.nodes.size());
  EXPECT_TRUE(args.as_array()[0].is_null());  // placeholder
  EXPECT_TRUE(args.as_array()[2].find("args") != nullptr);
  EXPECT_THROW(rank_call_args(g, plan_from_json(plan), {0, 0}), InvalidArgument);
}

namespace {

// training_graph with the gradient passed through a transpose carrying `flag` in its extra.
std::string flagged_gradient_graph(const char* flag) {
  std::string t = R"({"shape": [4096, 4096], "dtype": "float32"})";
  std::string x = R"({"shape": [65536, 4096], "dtype": "float32"})";
  return std::string(R"({"mesh": {"shape": [4]}, "nodes": [
    {"name": "w", "op": "placeholder", "role": "param", "extra": {"target": "w"}, "outputs": [)") + t + R"(]},
    {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [)" + x + R"(]},
    {"name": "y", "op": "aten.mm.default", "args": [{"t": [1, 0]}, {"t": [0, 0]}], "outputs": [)" + x + R"(]},
    {"name": "loss", "op": "aten.sum.default", "args": [{"t": [2, 0]}], "outputs": [{"shape": [], "dtype": "float32"}]},
    {"name": "xt", "op": "aten.t.default", "args": [{"t": [1, 0]}], "outputs": [{"shape": [4096, 65536], "dtype": "float32"}]},
    {"name": "gw", "op": "aten.mm.default", "args": [{"t": [4, 0]}, {"t": [1, 0]}], "outputs": [)" + t + R"(]},
    {"name": "gwt", "op": "aten.t.default", "args": [{"t": [5, 0]}], "outputs": [)" + t + R"(], "extra": {)" +
         flag + R"(: true}},
    {"name": "output", "op": "output", "args": [[{"t": [3, 0]}, {"t": [6, 0]}]],
     "extra": {"roles": ["output", "grad"], "targets": ["0", "w"]}}]})";
}

std::string in_spec(const json::Value& plan, size_t i) {
  return node(plan, i).at("strategy").at("inputs").as_array().at(0).as_string();
}

}  // namespace

TEST(Planner, KeepPartialInputsMovesTheReductionPastTheFlaggedNode) {
  // Batch-sharded x: gw = x^T x is a pending sum; a node flagged keep_partial_inputs takes it unreduced.
  PlanOptions opt;
  opt.fixed_params["w"] = parse_spec("R");
  opt.input_specs["0"] = parse_spec("S(0)");
  json::Value free_plan = plan_to_json(plan_graph(read_graph(flagged_gradient_graph(R"("unused")")), opt));
  EXPECT_EQ(out_spec(free_plan, 5), "P(sum)");
  EXPECT_EQ(in_spec(free_plan, 6), "R");  // reduced on the way into the transpose
  json::Value plan = plan_to_json(plan_graph(read_graph(flagged_gradient_graph(R"("keep_partial_inputs")")), opt));
  EXPECT_EQ(out_spec(plan, 5), "P(sum)");
  EXPECT_EQ(in_spec(plan, 6), "P(sum)");  // reduced after it
}

TEST(Planner, NoInputRedistributionForbidsCollectivesIntoTheNode) {
  PlanOptions opt;
  opt.fixed_params["w"] = parse_spec("R");
  opt.input_specs["0"] = parse_spec("S(0)");
  json::Value plan = plan_to_json(plan_graph(read_graph(flagged_gradient_graph(R"("no_input_redistribution")")), opt));
  const std::string produced = out_spec(plan, 5), taken = in_spec(plan, 6);
  EXPECT_TRUE(produced == taken || produced == "R") << produced << " -> " << taken;
}

TEST(Planner, ParametersCarryTheirShardsOptimizerStep) {
  // Train mode: the parameter node's time is AdamW's update of the shard it leaves in
  // (cost_model.h: optimizer_step_seconds), so a replicated weight pays the whole update
  // on every rank and the estimate counts it.
  Graph g = read_graph(training_graph(8192, "[4]"));
  PlanOptions opt;
  opt.fixed_params["w"] = parse_spec("R");
  json::Value replicated = plan_to_json(plan_graph(g, opt));
  opt.fixed_params["w"] = parse_spec("S(0)");
  json::Value sharded = plan_to_json(plan_graph(g, opt));
  const CostModel cm = make_cost_model(PlanOptions{}.device);
  const double whole = 8192.0 * 8192 * 4;
  EXPECT_NEAR(node(replicated, 0).at("compute_s").as_double(), cm.optimizer_step_seconds(whole, DType::Float32, 2),
              1e-12);
  EXPECT_NEAR(node(sharded, 0).at("compute_s").as_double(), cm.optimizer_step_seconds(whole / 4, DType::Float32, 2),
              1e-12);
  opt.optimizer_states = 0;  // plain SGD: fewer streams
  EXPECT_LT(node(plan_to_json(plan_graph(g, opt)), 0).at("compute_s").as_double(),
            node(sharded, 0).at("compute_s").as_double());
  opt.mode = "compile";  // no optimizer in a compiled forward
  EXPECT_EQ(node(plan_to_json(plan_graph(g, opt)), 0).at("compute_s").as_double(), 0.0);
}

TEST(Planner, RedistributionBuffersAreFittedUnderTheLimit) {
  // The solver bounds values; an input redistributed for a node holds a buffer on top while
  // that node runs. A limit between the cheapest plan's solver peak and its peak with
  // buffers: the plan must fit with them (a reserve at the steps they lift over the limit).
  for (const char* mesh : {"[4]", "[2, 2]", "[8]"}) {
    Graph g = read_graph(training_graph(2048, mesh));
    const Plan free = plan_graph(g, PlanOptions{});
    ASSERT_GT(free.summary.memory.peak, free.summary.peak_bytes) << mesh << ": no buffers to fit";
    PlanOptions opt;
    opt.memory_limit_bytes = (free.summary.memory.peak + free.summary.peak_bytes) / 2;
    const Plan fitted = plan_graph(g, opt);
    EXPECT_LE(fitted.summary.memory.peak, *opt.memory_limit_bytes) << mesh;
    EXPECT_LE(fitted.summary.peak_bytes, *opt.memory_limit_bytes) << mesh;
    // The refit may keep the first solve's bound (reserves only shrink the feasible set); the
    // gap it reports must still be a gap: the bound below the cost, the fraction matching.
    const auto& s = fitted.summary.solver;
    EXPECT_LE(s.bound, static_cast<double>(s.cost)) << mesh;
    EXPECT_NEAR(s.gap, (static_cast<double>(s.cost) - s.bound) / std::max(static_cast<double>(s.cost), 1.0), 1e-9)
        << mesh;
    // With the whole limit spent before the call (a caller's tracing), no time is left for a
    // re-solve and there is no folded plan to fall back on: the re-solve still runs, since a
    // plan over the memory limit fails when it runs.
    opt.elapsed_before_s = opt.time_limit_s;
    const Plan late = plan_graph(g, opt);
    EXPECT_LE(late.summary.memory.peak, *opt.memory_limit_bytes) << mesh;
  }
}
