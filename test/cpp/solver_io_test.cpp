// Problem files: our format and IOPDDL through one reader; errors name the field.
#include <gtest/gtest.h>

#include "core/json.h"
#include "core/solver/problem_io.h"
#include "solver_test_util.h"

namespace tlm::solver {
namespace {

const char* kExample = R"({"problem": {"name": "example",
  "nodes": {"intervals": [[30, 70], [40, 70], [50, 120], [110, 140], [110, 150]],
            "costs": [[15], [55, 65], [25, 45, 35], [85, 75], [95]],
            "usages": [[10], [25, 25], [15, 20, 15], [10, 10], [15]]},
  "edges": {"nodes": [[0, 1], [0, 2], [1, 3], [2, 4], [3, 4]],
            "costs": [[30, 40], [50, 10, 40], [90, 10, 20, 80], [60, 20, 30], [70, 60]]},
  "usage_limit": 50}})";

std::string error_of(const std::string& text) {
  try {
    read_problem(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SolverIo, ReadsTheContestExample) {
  Problem p = read_problem(kExample);
  EXPECT_EQ(p.name, "example");
  ASSERT_EQ(p.nodes.size(), 5u);
  EXPECT_EQ(p.nodes[2].strategies[1].cost, 45);
  EXPECT_EQ(p.nodes[2].strategies[1].usage, 20);
  EXPECT_EQ(p.nodes[4].end, 150);
  ASSERT_EQ(p.edges.size(), 5u);
  EXPECT_EQ(*p.edges[2].costs, (std::vector<Cost>{90, 10, 20, 80}));
  EXPECT_EQ(p.usage_limit, 50);
}

TEST(SolverIo, OurExtraFieldsRoundTrip) {
  Problem p = read_problem(kExample);
  p.nodes[1].pinned = 1;
  p.nodes[2].usage_upper = 15;
  p.nodes[3].usage_lower = 10;
  p.couplings = {{1, 3, {0, -1}}};
  std::vector<Cost> forbid = *p.edges[0].costs;
  forbid[1] = kInfiniteCost;
  p.edges[0].costs = make_cost_matrix(forbid);
  Problem q = read_problem(write_problem(p));
  EXPECT_EQ(q.nodes[1].pinned, 1);
  EXPECT_EQ(q.nodes[2].usage_upper, 15);
  EXPECT_FALSE(q.nodes[2].usage_lower.has_value());
  EXPECT_EQ(q.nodes[3].usage_lower, 10);
  ASSERT_EQ(q.couplings.size(), 1u);
  EXPECT_EQ(q.couplings[0].map, (std::vector<int>{0, -1}));
  EXPECT_EQ((*q.edges[0].costs)[1], kInfiniteCost);
  EXPECT_EQ(write_problem(q), write_problem(p));
}

TEST(SolverIo, BareProblemObjectAndIntegralDoubles) {
  Problem p = read_problem(R"({"nodes": {"intervals": [[0, 1]], "costs": [[1e+18, 2]], "usages": [[0, 0]]}})");
  EXPECT_EQ(p.nodes[0].strategies[0].cost, 1000000000000000000LL);
  EXPECT_FALSE(p.usage_limit.has_value());
}

TEST(SolverIo, ErrorsNameFieldAndPosition) {
  EXPECT_NE(error_of(R"({"problem": {"nodes": {"intervals": [[0, 1]], "costs": [[1]]}}})")
                .find("problem.nodes: missing field 'usages'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"problem": {"nodes": {"intervals": [[0, 1]], "costs": [[1, 2]], "usages": [[1]]}}})")
                .find("problem.nodes.usages[0]: has 1 entries; expected 2"),
            std::string::npos);
  const std::string two = R"({"problem": {"nodes": {"intervals": [[0, 1], [0, 1]], "costs": [[1, 2], [3, 4]], "usages": [[0, 0], [0, 0]]},)";
  EXPECT_NE(error_of(two + R"("edges": {"nodes": [[0, 1], [1, 0]], "costs": [[1, 2, 3, 4], [1, 2, 3]]}}})")
                .find("problem.edges.costs[1]: has 3 entries; expected |S_u| x |S_v| = 4"),
            std::string::npos);
  EXPECT_NE(error_of(two + R"("edges": {"nodes": [[0, 7]], "costs": [[1, 2, 3, 4]]}}})")
                .find("problem.edges.nodes[0][1]: node index 7 out of range"),
            std::string::npos);
  EXPECT_NE(error_of(two + R"("edges": {"nodes": [[0, 1]], "costs": [[1, "x", 3, 4]]}}})")
                .find("problem.edges.costs[0][1]: expected integer, got string"),
            std::string::npos);
  EXPECT_NE(error_of(two + R"("edges": {"nodes": [[0, 1]], "costs": [[1, 2.5, 3, 4]]}}})")
                .find("problem.edges.costs[0][1]: expected integer, got 2.5"),
            std::string::npos);
  EXPECT_NE(error_of(two + R"("usage_limit": 99999999999999999999}})").find("does not fit in 64 bits"),
            std::string::npos);
  EXPECT_NE(error_of("{\"problem\": {\"nodes\": {\"intervals\": [[0, 1]]\n, \"costs\": [[1]] \"usages\": [[1]]}}}")
                .find("JSON parse error at line 2, column 18 (in problem.nodes): expected ',' or '}'"),
            std::string::npos);
  EXPECT_NE(error_of(two + R"("couplings": {"nodes": [[0, 1]], "maps": [[0, 5]]}}})")
                .find("problem.couplings.maps[0][1]: strategy 5 out of range; expected -1..1"),
            std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("expected object, got array"), std::string::npos);
  EXPECT_NE(error_of("").find("expected object, got end of input"), std::string::npos);
}

TEST(SolverIo, ErrorKindsAreInvalidArgument) {
  EXPECT_THROW(read_problem("{\"problem\": {"), json::ParseError);
  EXPECT_THROW(read_problem(R"({"problem": {"nodes": 3}})"), json::SchemaError);
}

TEST(SolverIo, SolutionFiles) {
  Problem p = read_problem(kExample);
  Solution x{0, 0, 2, 1, 0};
  std::string doc = write_solution(p, x, "\"bound\":445");
  EXPECT_NE(doc.find("\"cost\":445"), std::string::npos) << doc;
  EXPECT_EQ(read_solution(doc), x);
  EXPECT_EQ(read_solution("[0, 1]"), (Solution{0, 1}));
  EXPECT_THROW(read_solution("{\"x\": 1}"), json::SchemaError);
}

}  // namespace
}  // namespace tlm::solver
