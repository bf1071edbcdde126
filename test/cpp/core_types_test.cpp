#include <gtest/gtest.h>

#include "core/graph.h"
#include "core/json.h"
#include "core/mesh.h"
#include "core/placement.h"
#include "core/tensor_meta.h"

using namespace tlm;

TEST(Json, RoundTripKeepsInt64AndOrder) {
  auto v = json::parse(R"({"b": 9007199254740993, "a": [1, 2.5, "x\n", null, true]})");
  EXPECT_EQ(v.at("b").as_int(), 9007199254740993LL);
  EXPECT_EQ(v.dump(), R"({"b":9007199254740993,"a":[1,2.5,"x\n",null,true]})");
}

TEST(Json, ErrorsNameLineAndColumn) {
  try {
    json::parse("{\n  \"a\": [1, 2,, 3]\n}");
    FAIL() << "expected a parse error";
  } catch (const json::ParseError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2, column 14"), std::string::npos) << e.what();
  }
  EXPECT_THROW(json::parse("[1, 2"), json::ParseError);
  EXPECT_THROW(json::parse(std::string(10000, '[')), json::ParseError);  // depth bound, no stack overflow
}

TEST(Json, SchemaErrorsNameTheField) {
  auto v = json::parse(R"({"nodes": {"costs": [[1, "x"]]}})");
  try {
    json::int_list(v.at("nodes").at("costs").as_array()[0], "nodes.costs[0]");
    FAIL();
  } catch (const json::SchemaError& e) {
    EXPECT_STREQ(e.what(), "nodes.costs[0][1]: expected integer, got string");
  }
}

TEST(Placement, ParseAndPrint) {
  EXPECT_EQ(to_string(parse_spec("S(0)RP(max)")), "S(0)RP(max)");
  EXPECT_EQ(to_string(parse_spec("[S(1), R]")), "S(1)R");
  EXPECT_EQ(parse_spec("P").at(0), Placement::partial(ReduceOp::Sum));
  EXPECT_THROW(parse_placement("Q"), InvalidArgument);
  EXPECT_THROW(parse_placement("P(prod)"), InvalidArgument);
}

TEST(Placement, ValidateNormalizesNegativeDims) {
  auto s = parse_spec("S(-1)R");
  validate_spec(s, 3, 2, "x");
  EXPECT_EQ(s[0], Placement::shard(2));
  auto bad = parse_spec("S(3)");
  EXPECT_THROW(validate_spec(bad, 3, 1, "x"), InvalidArgument);
  auto wrong_len = parse_spec("RR");
  EXPECT_THROW(validate_spec(wrong_len, 3, 1, "x"), InvalidArgument);
}

TEST(Mesh, CoordinatesAreRowMajor) {
  Mesh m = make_mesh({2, 3});
  EXPECT_EQ(m.coordinate(4), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(m.rank({1, 2}), 5);
  EXPECT_THROW(make_mesh({2, 0}), InvalidArgument);
  EXPECT_THROW(make_mesh({}), InvalidArgument);
  EXPECT_THROW(make_mesh({2, 2}, {"dp"}), InvalidArgument);
}

TEST(TensorMeta, Dtypes) {
  EXPECT_EQ(parse_dtype("torch.bfloat16"), DType::BFloat16);
  EXPECT_EQ(element_size(DType::Float64), 8);
  EXPECT_THROW(parse_dtype("float13"), InvalidArgument);
}

TEST(Graph, ReadsNodesAndRejectsForwardReferences) {
  const char* ok = R"({"mesh": {"shape": [2]}, "nodes": [
    {"name": "x", "op": "placeholder", "role": "input", "outputs": [{"shape": [4, 8], "dtype": "float32"}]},
    {"name": "w", "op": "placeholder", "role": "param", "outputs": [{"shape": [8, 2], "dtype": "float32"}]},
    {"name": "mm", "op": "aten.mm.default", "args": [{"t": [0, 0]}, {"t": [1, 0]}],
     "outputs": [{"shape": [4, 2], "dtype": "float32"}]},
    {"name": "output", "op": "output", "args": [[{"t": [2, 0]}]]}]})";
  Graph g = read_graph(std::string(ok));
  ASSERT_EQ(g.nodes.size(), 4u);
  EXPECT_EQ(g.nodes[2].tensor_inputs.size(), 2u);
  EXPECT_EQ(g.nodes[0].users, (std::vector<int>{2}));
  const char* bad = R"({"mesh": {"shape": [2]}, "nodes": [
    {"name": "mm", "op": "aten.mm.default", "args": [{"t": [1, 0]}], "outputs": []}]})";
  EXPECT_THROW(read_graph(std::string(bad)), InvalidArgument);
}
