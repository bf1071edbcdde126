// core/memory_estimate.h: per-rank bytes of a planned step by kind.
#include <gtest/gtest.h>

#include "core/graph.h"
#include "core/memory_estimate.h"
#include "core/placement.h"

using namespace tlm;

namespace {

// x (input, 8x16) @ w (param, 16x32) -> y; loss; grad of w (16x32) as an output.
const char* kGraph = R"({"mesh": {"shape": [2]}, "nodes": [
  {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [{"shape": [8, 16], "dtype": "float32"}]},
  {"name": "w", "op": "placeholder", "role": "param", "extra": {"target": "w"}, "outputs": [{"shape": [16, 32], "dtype": "float32"}]},
  {"name": "y", "op": "aten.mm.default", "args": [{"t": [0, 0]}, {"t": [1, 0]}], "outputs": [{"shape": [8, 32], "dtype": "float32"}]},
  {"name": "loss", "op": "aten.sum.default", "args": [{"t": [2, 0]}], "outputs": [{"shape": [], "dtype": "float32"}]},
  {"name": "gw", "op": "aten.mm.default", "args": [{"t": [0, 0]}, {"t": [2, 0]}], "outputs": [{"shape": [16, 32], "dtype": "float32"}]},
  {"name": "output", "op": "output", "args": [[{"t": [3, 0]}, {"t": [4, 0]}]],
   "extra": {"roles": ["output", "grad"], "targets": ["0", "w"]}}]})";

OpStrategy strat(std::vector<std::string> in, std::vector<std::string> out) {
  OpStrategy s;
  for (auto& x : in) s.inputs.push_back(parse_spec(x));
  for (auto& x : out) s.outputs.push_back(parse_spec(x));
  return s;
}

}  // namespace

TEST(MemoryEstimate, ShardedParameterHalvesParametersGradientsAndOptimizerState) {
  Graph g = read_graph(std::string(kGraph));
  const int64_t w_bytes = 16 * 32 * 4;
  // Replicated everything (DDP-like).
  std::vector<OpStrategy> rep{strat({}, {"R"}), strat({}, {"R"}), strat({"R", "R"}, {"R"}), strat({"R"}, {"R"}),
                              strat({"R", "R"}, {"R"}), strat({"R", "R"}, {})};
  MemoryEstimate r = estimate_memory(g, rep, 2);
  EXPECT_EQ(r.parameters, w_bytes);
  EXPECT_EQ(r.gradients, w_bytes);
  EXPECT_EQ(r.optimizer_state, 2 * w_bytes);
  // Live at the peak (gw made): x, y, gw (loss is 4 bytes and may be freed already).
  EXPECT_GE(r.peak - r.parameters - r.optimizer_state, (8 * 16 + 8 * 32 + 16 * 32) * 4);
  // w sharded on dim 0, gathered for the matmul (a transient), gradient leaves sharded.
  std::vector<OpStrategy> shard{strat({}, {"R"}), strat({}, {"S(0)"}), strat({"R", "R"}, {"R"}), strat({"R"}, {"R"}),
                                strat({"R", "R"}, {"S(0)"}), strat({"R", "S(0)"}, {})};
  MemoryEstimate s = estimate_memory(g, shard, 2);
  EXPECT_EQ(s.parameters, w_bytes / 2);
  EXPECT_EQ(s.gradients, w_bytes / 2);
  EXPECT_EQ(s.optimizer_state, w_bytes);
  EXPECT_LT(s.peak, r.peak);
  // The gathered weight counts while the matmul runs: the peak is at least x + w gathered + y.
  EXPECT_GE(s.peak - s.parameters - s.optimizer_state, (8 * 16 + 16 * 32 + 8 * 32) * 4);
  EXPECT_EQ(estimate_memory(g, shard, 0).optimizer_state, 0);
}

TEST(MemoryEstimate, RejectsAStrategyListOfTheWrongLength) {
  Graph g = read_graph(std::string(kGraph));
  EXPECT_THROW(estimate_memory(g, {strat({}, {"R"})}, 2), InvalidArgument);
  EXPECT_THROW(estimate_memory(g, std::vector<OpStrategy>(6), -1), InvalidArgument);
}

TEST(MemoryEstimate, AGradientHoldsItsReducedBytesOnceMade) {
  // As kGraph, with one more backward op (z = x * x) after the weight gradient: the runtime
  // reduces gw (a Partial, w's full size) as soon as it is made, so from then on it holds
  // its bytes in w's spec, a shard.
  Graph g = read_graph(std::string(R"({"mesh": {"shape": [2]}, "nodes": [
  {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [{"shape": [8, 16], "dtype": "float32"}]},
  {"name": "w", "op": "placeholder", "role": "param", "extra": {"target": "w"}, "outputs": [{"shape": [16, 32], "dtype": "float32"}]},
  {"name": "y", "op": "aten.mm.default", "args": [{"t": [0, 0]}, {"t": [1, 0]}], "outputs": [{"shape": [8, 32], "dtype": "float32"}]},
  {"name": "loss", "op": "aten.sum.default", "args": [{"t": [2, 0]}], "outputs": [{"shape": [], "dtype": "float32"}]},
  {"name": "gw", "op": "aten.mm.default", "args": [{"t": [0, 0]}, {"t": [2, 0]}], "outputs": [{"shape": [16, 32], "dtype": "float32"}]},
  {"name": "z", "op": "aten.mul.Tensor", "args": [{"t": [0, 0]}, {"t": [0, 0]}], "outputs": [{"shape": [8, 16], "dtype": "float32"}]},
  {"name": "output", "op": "output", "args": [[{"t": [3, 0]}, {"t": [4, 0]}]],
   "extra": {"roles": ["output", "grad"], "targets": ["0", "w"]}}]})"));
  std::vector<OpStrategy> chosen{strat({}, {"S(0)"}),           strat({}, {"S(0)"}),
                                 strat({"S(0)", "R"}, {"S(0)"}), strat({"S(0)"}, {"P(sum)"}),
                                 strat({"S(1)", "S(0)"}, {"P(sum)"}), strat({"S(0)", "S(0)"}, {"S(0)"}),
                                 strat({"R", "S(0)"}, {})};
  const MemoryEstimate m = estimate_memory(g, chosen, 2);
  ASSERT_EQ(m.timeline_nodes.back(), 5);
  const int64_t x = 4 * 16 * 4, gw_reduced = 8 * 32 * 4, z = 4 * 16 * 4, loss = 4;
  // At z: x (read by z), loss (an output), gw reduced and z itself; y was freed after gw.
  EXPECT_EQ(m.timeline_bytes.back(), x + loss + gw_reduced + z);
  EXPECT_EQ(m.gradients, gw_reduced);
}
