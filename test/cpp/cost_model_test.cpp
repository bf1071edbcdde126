// Worked examples of the cost model: each expected value is the documented
// formula (docs/cost_model.md) evaluated by hand on the device table's numbers.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/calibration.h"
#include "core/cost_model.h"

namespace tlm {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// Relative comparison: the formulas are a handful of flops, so 1e-12 is exact
// up to rounding.
void expect_close(double got, double want) { EXPECT_NEAR(got, want, 1e-12 * std::fabs(want)) << got << " vs " << want; }

Mesh mesh(std::vector<int64_t> shape) { return make_mesh(std::move(shape)); }

// ---------------------------------------------------------------- device table

// Every row of the table (device_table.cpp) is checked, so a new device is a
// new row there and nothing here.
TEST(DeviceTable, EveryRowResolvesCaseInsensitivelyWithUsableNumbers) {
  const std::vector<std::string> names = device_names();
  ASSERT_FALSE(names.empty());
  std::set<std::string> seen;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    std::string upper = name, lower = name;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_TRUE(seen.insert(lower).second) << "names must differ without case";
    EXPECT_EQ(device_profile(upper).name, name);
    EXPECT_EQ(device_profile(lower).name, name);
    const DeviceProfile& d = device_profile(name);
    for (double v : {d.peak_flops_fp64, d.peak_flops_fp32, d.peak_flops_bf16, d.peak_flops_fp8, d.memory_bandwidth,
                     d.memory_capacity, d.kernel_overhead_s})
      EXPECT_GT(v, 0);
    const Topology t = default_topology(name);
    EXPECT_GE(t.ranks_per_node, 1);
    for (double v : {t.intra_bandwidth, t.inter_bandwidth, t.intra_latency, t.inter_latency}) EXPECT_GT(v, 0);
    EXPECT_NO_THROW(make_cost_model(name));
  }
}

// Spot checks of datasheet figures (docs/cost_model.md lists their sources).
TEST(DeviceTable, SpotChecksOfDatasheetFigures) {
  EXPECT_DOUBLE_EQ(device_profile("H100").peak_flops_bf16, 989.5e12);
  EXPECT_DOUBLE_EQ(device_profile("H200").memory_bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(device_profile("A100").memory_bandwidth, 2.039e12);
  EXPECT_DOUBLE_EQ(device_profile("B200").peak_flops_fp8, 4.5e15);
  EXPECT_DOUBLE_EQ(default_topology("H100").intra_bandwidth, 450e9);
  EXPECT_DOUBLE_EQ(default_topology("A100").inter_bandwidth, 25e9);
}

TEST(DeviceTable, UnknownDeviceListsKnownOnes) {
  std::string known;
  for (const std::string& n : device_names()) known += (known.empty() ? "" : ", ") + n;
  try {
    device_profile("TPUv5");
    FAIL() << "expected InvalidArgument";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("TPUv5"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected one of: " + known + ")"), std::string::npos) << msg;
  }
  EXPECT_THROW(make_cost_model("V100"), InvalidArgument);
  EXPECT_THROW(default_topology(""), InvalidArgument);
}

// --------------------------------------------------------------------- compute

TEST(Compute, MatmulIsComputeBoundOnH100) {
  const CostModel m = make_cost_model("H100");
  // bf16 4096^3 matmul: 2*4096^3 FLOP; reads two operands, writes one.
  const OpWork w{2.0 * 4096 * 4096 * 4096, 3.0 * 4096 * 4096 * 2};
  // max(1.374e11 / (989.5e12 * 0.7), 1.007e8 / (3.35e12 * 0.8)) + 4 us
  expect_close(m.compute_seconds(w, DType::BFloat16), 2.0 * 4096 * 4096 * 4096 / (989.5e12 * 0.7) + 4e-6);
  expect_close(m.compute_seconds(w, DType::BFloat16), 2.024248227416444e-4);
  // The same work in float32 runs at the 67 TFLOP/s non-tensor-core rate.
  expect_close(m.compute_seconds(w, DType::Float32), 2.0 * 4096 * 4096 * 4096 / (67e12 * 0.7) + 4e-6);
}

TEST(Compute, SkinnyMatmulsRunBelowTheRateByTheHalfDim) {
  // 16 rows x 4096 x 4096 in float32: compute-bound at any n-half here.
  const OpWork w{2.0 * 16 * 4096 * 4096, 4.0 * (16 * 4096 + 4096 * 4096 + 16 * 4096), /*min_dim=*/16};
  const double flop_time = w.flops / (67e12 * 0.7);
  // The table has no shape effect.
  expect_close(make_cost_model("H100").compute_seconds(w, DType::Float32),
               std::max(flop_time, w.bytes / (3.35e12 * 0.8)) + 4e-6);
  // n-half 16: 16 rows run at half the rate; 1600 rows at 1/1.01 of it; other ops as before.
  const CostModel h = make_cost_model("cpu", R"({"device": {"matmul_half_dim": 16}})");
  const DeviceProfile& cpu = device_profile("cpu");
  const double rate = cpu.peak_flops_fp32 * cpu.compute_efficiency;
  expect_close(h.compute_seconds(w, DType::Float32), std::max(2 * w.flops / rate, w.bytes / (cpu.memory_bandwidth * cpu.memory_efficiency)) + cpu.kernel_overhead_s);
  const OpWork tall{2.0 * 1600 * 4096 * 4096, 0, /*min_dim=*/1600};
  expect_close(h.compute_seconds(tall, DType::Float32), 1.01 * tall.flops / rate + cpu.kernel_overhead_s);
  const OpWork pointwise{1e6, 0};
  expect_close(h.compute_seconds(pointwise, DType::Float32), 1e6 / rate + cpu.kernel_overhead_s);
  EXPECT_THROW(make_cost_model("cpu", R"({"device": {"matmul_half_dim": -1}})"), InvalidArgument);
}

TEST(Compute, AttentionPaysItsHeadWidthAndTheCausalDiagonalTiles) {
  // Causal attention over 256 keys with heads of 32: flops count the half below the diagonal.
  const OpWork causal{1e9, 0, /*min_dim=*/0, /*head_dim=*/32, /*causal_keys=*/256};
  const DeviceProfile& cpu = device_profile("cpu");
  const double rate = cpu.peak_flops_fp32 * cpu.compute_efficiency;
  // The table prices attention as matmul flops (no head or tile effect).
  expect_close(make_cost_model("cpu").compute_seconds(causal, DType::Float32), 1e9 / rate + cpu.kernel_overhead_s);
  // Heads of 32 with attention_half_dim 16: 1.5x; 512-key tiles over 256 keys: the full scores (2x).
  const CostModel m = make_cost_model("cpu", R"({"device": {"attention_half_dim": 16, "attention_causal_tile": 512}})");
  expect_close(m.compute_seconds(causal, DType::Float32), 1.5 * 2 * 1e9 / rate + cpu.kernel_overhead_s);
  // Over 2048 keys the diagonal's tiles add a quarter of the half; without causality nothing.
  const OpWork long_causal{1e9, 0, 0, 32, 2048};
  expect_close(m.compute_seconds(long_causal, DType::Float32), 1.5 * 1.25 * 1e9 / rate + cpu.kernel_overhead_s);
  const OpWork full{1e9, 0, 0, 32, 0};
  expect_close(m.compute_seconds(full, DType::Float32), 1.5 * 1e9 / rate + cpu.kernel_overhead_s);
  // Not attention: neither field applies.
  const OpWork matmul{1e9, 0, /*min_dim=*/4096};
  expect_close(m.compute_seconds(matmul, DType::Float32), 1e9 / rate + cpu.kernel_overhead_s);
  EXPECT_THROW(make_cost_model("cpu", R"({"device": {"attention_half_dim": -1}})"), InvalidArgument);
  EXPECT_THROW(make_cost_model("cpu", R"({"device": {"attention_causal_tile": -512}})"), InvalidArgument);
}

TEST(Compute, PointwiseIsMemoryBound) {
  const CostModel m = make_cost_model("H100");
  // relu over 1e8 float32: 1e8 FLOP, 8e8 bytes -> 8e8 / (3.35e12 * 0.8) + 4 us.
  expect_close(m.compute_seconds(OpWork{1e8, 8e8}, DType::Float32), 3.0250746268656716e-4);
}

TEST(Compute, ZeroWorkCostsNothingAndBadWorkThrows) {
  const CostModel m = make_cost_model("A100");
  EXPECT_EQ(m.compute_seconds(OpWork{0, 0}, DType::Float32), 0.0);
  EXPECT_THROW(m.compute_seconds(OpWork{-1, 0}, DType::Float32), InvalidArgument);
  EXPECT_THROW(m.compute_seconds(OpWork{0, std::nan("")}, DType::Float32), InvalidArgument);
}

TEST(Compute, ABucketCopyReadsAndWritesItsBytesOnce) {
  const CostModel m = make_cost_model("A100");
  EXPECT_EQ(m.bucket_copy_seconds(0), 0.0);
  EXPECT_DOUBLE_EQ(m.bucket_copy_seconds(1e6), 2e6 / (m.device.memory_bandwidth * m.device.memory_efficiency));
  EXPECT_THROW(m.bucket_copy_seconds(-1), InvalidArgument);
}

TEST(Compute, OptimizerStepStreamsItsStateAndLaunchesAKernelPerUpdate) {
  const CostModel m = make_cost_model("H100");
  // AdamW (2 states) over a 64 MiB float32 shard: 3 + 8 x 2 = 19 shard-sized streams,
  // memory-bound, and 1 + 3 x 2 = 7 kernels.
  const double shard = 64 * kMiB;
  expect_close(m.optimizer_step_seconds(shard, DType::Float32, 2), 19 * shard / (3.35e12 * 0.8) + 7 * 4e-6);
  // Plain SGD (no state): read parameter and gradient, write the parameter, one kernel.
  expect_close(m.optimizer_step_seconds(shard, DType::Float32, 0), 3 * shard / (3.35e12 * 0.8) + 4e-6);
  // A quarter of the parameter streams a quarter of the bytes; the kernels stay 7.
  expect_close(m.optimizer_step_seconds(shard / 4, DType::Float32, 2), 19 * shard / 4 / (3.35e12 * 0.8) + 7 * 4e-6);
  EXPECT_EQ(m.optimizer_step_seconds(0, DType::Float32, 2), 0.0);
  EXPECT_THROW(m.optimizer_step_seconds(-1, DType::Float32, 2), InvalidArgument);
  // A calibrated per-kernel optimizer overhead (eager DTensor dispatch) is paid by each of the 7.
  const CostModel c = make_cost_model("H100", R"({"device": {"optimizer_kernel_overhead_s": 5e-5}})");
  expect_close(c.optimizer_step_seconds(shard, DType::Float32, 2), 19 * shard / (3.35e12 * 0.8) + 7 * 4e-6 + 7 * 5e-5);
  EXPECT_THROW(make_cost_model("H100", R"({"device": {"optimizer_kernel_overhead_s": -1}})"), InvalidArgument);
  // A measured optimizer bandwidth replaces the roofline for the update's 19 streams.
  const CostModel b = make_cost_model("H100", R"({"device": {"optimizer_bandwidth": 1e11}})");
  expect_close(b.optimizer_step_seconds(shard, DType::Float32, 2), 19 * shard / 1e11 + 7 * 4e-6);
  EXPECT_THROW(make_cost_model("H100", R"({"device": {"optimizer_bandwidth": -1}})"), InvalidArgument);
  EXPECT_THROW(m.optimizer_step_seconds(shard, DType::Float32, -1), InvalidArgument);
}

TEST(Compute, PeakFlopsPerDtypeClass) {
  const DeviceProfile& d = device_profile("H100");
  EXPECT_EQ(peak_flops(d, DType::Float64), d.peak_flops_fp64);
  EXPECT_EQ(peak_flops(d, DType::Float16), d.peak_flops_bf16);
  EXPECT_EQ(peak_flops(d, DType::Float8E5M2), d.peak_flops_fp8);
  EXPECT_EQ(peak_flops(d, DType::Int64), d.peak_flops_fp32);
  EXPECT_EQ(peak_flops(d, DType::Complex128), d.peak_flops_fp64);
}

// -------------------------------------------------------------------- topology

TEST(Topology, MeshDimsMapOntoNodes) {
  using K = GroupTopology::Kind;
  EXPECT_EQ(group_topology(mesh({8}), 0, 8).kind, K::Intra);
  EXPECT_EQ(group_topology(mesh({8, 8}), 1, 8).kind, K::Intra);   // stride 1, 8 ranks per group
  EXPECT_EQ(group_topology(mesh({8, 8}), 0, 8).kind, K::Inter);   // stride 8: one member per node
  EXPECT_EQ(group_topology(mesh({2, 4}), 0, 8).kind, K::Intra);   // whole mesh fits in a node
  EXPECT_EQ(group_topology(mesh({1, 8}), 0, 8).kind, K::Single);
  const GroupTopology h = group_topology(mesh({16}), 0, 8);
  EXPECT_EQ(h.kind, K::Hierarchical);
  EXPECT_EQ(h.local, 8);
  EXPECT_EQ(h.nodes, 2);
  const GroupTopology h2 = group_topology(mesh({8, 2}), 0, 8);  // stride 2: 4 members on each of 2 nodes
  EXPECT_EQ(h2.kind, K::Hierarchical);
  EXPECT_EQ(h2.local, 4);
  EXPECT_EQ(h2.nodes, 2);
  EXPECT_EQ(group_topology(mesh({12}), 0, 8).kind, K::Mixed);   // groups straddle node 0/1 unevenly
  EXPECT_THROW(group_topology(mesh({8}), 1, 8), InvalidArgument);
  EXPECT_THROW(group_topology(mesh({8}), 0, 0), InvalidArgument);
}

// ----------------------------------------------------------------- collectives

TEST(Collectives, AllGather64MiBOver8H100NVLink) {
  const CostModel m = make_cost_model("H100");
  // (n-1) * (latency + bytes/n / bw) = 7 * (1.9 us + 8 MiB / 450 GB/s)
  expect_close(m.collective_seconds(CollectiveKind::AllGather, mesh({8}), 0, 64 * kMiB),
               7 * (1.9e-6 + 8 * kMiB / 450e9));
  expect_close(m.collective_seconds(CollectiveKind::AllGather, mesh({8}), 0, 64 * kMiB), 1.4378945777777778e-4);
  // Reduce-scatter moves the same bytes in the same steps.
  expect_close(m.collective_seconds(CollectiveKind::ReduceScatter, mesh({8}), 0, 64 * kMiB), 1.4378945777777778e-4);
  // All-to-all: (n-1) latency steps + (n-1)/n of the buffer.
  expect_close(m.collective_seconds(CollectiveKind::AllToAll, mesh({8}), 0, 64 * kMiB), 1.4378945777777778e-4);
}

TEST(Collectives, AllGatherAcrossNodesUsesTheNic) {
  const CostModel m = make_cost_model("H100");
  // mesh 8x8, dim 0: stride 8 -> one member per node: 7 * (4 us + 8 MiB / 50 GB/s)
  expect_close(m.collective_seconds(CollectiveKind::AllGather, mesh({8, 8}), 0, 64 * kMiB), 1.20240512e-3);
}

TEST(Collectives, HierarchicalAndMixedGroups) {
  const CostModel m = make_cost_model("H100");
  // 16 ranks on 2 nodes: 14 NVLink hops + 1 network hop, 15 chunks of 4 MiB at 50 GB/s.
  expect_close(m.collective_seconds(CollectiveKind::AllGather, mesh({16}), 0, 64 * kMiB),
               14 * 1.9e-6 + 1 * 4e-6 + 15 * (4 * kMiB) / 50e9);
  // 12 ranks straddling nodes unevenly: a flat ring on the network link.
  expect_close(m.collective_seconds(CollectiveKind::AllGather, mesh({12}), 0, 64 * kMiB),
               11 * (4e-6 + 64 * kMiB / 12 / 50e9));
  // Hierarchical all-to-all: 7 intra peers, 8 inter peers, 4 MiB each.
  expect_close(m.collective_seconds(CollectiveKind::AllToAll, mesh({16}), 0, 64 * kMiB),
               7 * (1.9e-6 + 4 * kMiB / 450e9) + 8 * (4e-6 + 4 * kMiB / 50e9));
}

TEST(Collectives, AllReducePicksRingOrTree) {
  const CostModel m = make_cost_model("H100");
  // 1 GiB: ring 14 * (1.9 us + 128 MiB / 450 GB/s) beats tree 6 * 1.9 us + 2 GiB / 450 GB/s.
  const double gib = 1024 * kMiB;
  expect_close(m.collective_seconds(CollectiveKind::AllReduce, mesh({8}), 0, gib), 14 * (1.9e-6 + gib / 8 / 450e9));
  // 1 KiB: latency-bound, the tree's 2*log2(8) = 6 steps beat the ring's 14.
  expect_close(m.collective_seconds(CollectiveKind::AllReduce, mesh({8}), 0, 1024), 6 * 1.9e-6 + 2 * 1024 / 450e9);
}

TEST(Collectives, TrivialGroupsAndEmptyBuffersAreFree) {
  const CostModel m = make_cost_model("H100");
  EXPECT_EQ(m.collective_seconds(CollectiveKind::AllReduce, mesh({1, 8}), 0, 64 * kMiB), 0.0);
  EXPECT_EQ(m.collective_seconds(CollectiveKind::AllGather, mesh({8}), 0, 0), 0.0);
  EXPECT_THROW(m.collective_seconds(CollectiveKind::AllGather, mesh({8}), 0, -1), InvalidArgument);
  EXPECT_THROW(m.collective_seconds(CollectiveKind::LocalChunk, mesh({8}), 0, 1), InvalidArgument);
}

TEST(Collectives, MoreBytesNeverCheaper) {
  const CollectiveKind kinds[] = {CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce,
                                  CollectiveKind::AllToAll};
  const std::vector<Mesh> meshes = {mesh({8}), mesh({8, 8}), mesh({16}), mesh({12}), mesh({8, 2}), mesh({3})};
  for (const auto& name : device_names()) {
    const CostModel m = make_cost_model(name);
    for (const auto kind : kinds)
      for (const auto& me : meshes) {
        double prev = 0;
        for (double bytes = 1; bytes <= 1e11; bytes *= 1.7) {
          const double t = m.collective_seconds(kind, me, 0, bytes);
          EXPECT_GE(t, prev) << name << " " << collective_name(kind) << " " << me.to_string() << " " << bytes;
          prev = t;
        }
      }
  }
}

TEST(Collectives, InterNodeNeverCheaperThanIntraNode) {
  const CollectiveKind kinds[] = {CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllReduce,
                                  CollectiveKind::AllToAll};
  for (const auto& name : device_names()) {
    const CostModel m = make_cost_model(name);
    const int64_t rpn = m.topology.ranks_per_node;
    // n ranks inside one node vs the same n ranks one per node.
    const Mesh intra = mesh({rpn}), inter = mesh({rpn, rpn});
    ASSERT_EQ(group_topology(inter, 0, rpn).kind, GroupTopology::Kind::Inter);
    for (const auto kind : kinds)
      for (double bytes = 1; bytes <= 1e11; bytes *= 3.1) {
        const double a = m.collective_seconds(kind, intra, 0, bytes);
        const double e = m.collective_seconds(kind, inter, 0, bytes);
        EXPECT_GE(e, a) << name << " " << collective_name(kind) << " " << bytes;
      }
  }
  // The hierarchical 8-rank group (4 per node on 2 nodes) lies in between.
  const CostModel m = make_cost_model("H100");
  for (const auto kind : kinds)
    for (double bytes = 1; bytes <= 1e11; bytes *= 3.1) {
      const double a = m.collective_seconds(kind, mesh({8}), 0, bytes);
      const double h = m.collective_seconds(kind, mesh({8, 2}), 0, bytes);
      const double e = m.collective_seconds(kind, mesh({8, 8}), 0, bytes);
      EXPECT_LE(a, h) << collective_name(kind) << " " << bytes;
      EXPECT_LE(h, e) << collective_name(kind) << " " << bytes;
    }
}

// ------------------------------------------------------- steps, redistribution

TEST(Steps, AllGatherStepChargesTheGatheredShards) {
  const CostModel m = make_cost_model("H100");
  // float32 [4096, 4096] = 64 MiB, S(0) -> R over 8 ranks: each rank gathers 8 shards of 8 MiB.
  CollectiveStep s;
  s.kind = CollectiveKind::AllGather;
  s.mesh_dim = 0;
  s.src_dim = 0;
  s.shape = {4096, 4096};
  s.before = parse_spec("S(0)");
  s.after = parse_spec("R");
  expect_close(m.step_seconds(s, mesh({8}), DType::Float32), 1.4378945777777778e-4);
  // Uneven: 4095 rows -> shards of 512 rows at most, padded like DTensor: same bytes.
  s.shape = {4095, 4096};
  expect_close(m.step_seconds(s, mesh({8}), DType::Float32), 1.4378945777777778e-4);
  s.mesh_dim = 1;
  EXPECT_THROW(m.step_seconds(s, mesh({8}), DType::Float32), InvalidArgument);
}

TEST(Steps, LocalStepsAreLocalCopies) {
  const CostModel m = make_cost_model("H100");
  CollectiveStep s;
  s.kind = CollectiveKind::LocalChunk;
  s.mesh_dim = 0;
  s.dst_dim = 0;
  s.shape = {4096, 4096};
  s.before = parse_spec("R");
  s.after = parse_spec("S(0)");
  // Clone of an 8 MiB chunk: read + write 16 MiB at 3.35 TB/s * 0.8, plus the 4 us launch.
  expect_close(m.step_seconds(s, mesh({8}), DType::Float32), 16 * kMiB / (3.35e12 * 0.8) + 4e-6);
  s.kind = CollectiveKind::LocalPartition;
  s.after = parse_spec("P(max)");
  s.reduce = ReduceOp::Max;
  EXPECT_EQ(m.step_seconds(s, mesh({8}), DType::Float32), 0.0);  // value kept as is
  s.after = parse_spec("P(sum)");
  s.reduce = ReduceOp::Sum;  // divides the full 64 MiB replica by n
  expect_close(m.step_seconds(s, mesh({8}), DType::Float32), 128 * kMiB / (3.35e12 * 0.8) + 4e-6);
}

TEST(Redistribute, SumsThePlansStepsAndRefusalsAreInfinite) {
  const CostModel m = make_cost_model("H100");
  const TensorMeta t{{4096, 4096}, DType::Float32};
  const Mesh mm = mesh({8});
  EXPECT_EQ(m.redistribute_seconds(t, mm, parse_spec("S(0)"), parse_spec("S(0)")), 0.0);
  expect_close(m.redistribute_seconds(t, mm, parse_spec("S(0)"), parse_spec("R")), 1.4378945777777778e-4);
  // Partial(sum) -> Replicate: all-reduce of the 64 MiB buffer (ring wins).
  expect_close(m.redistribute_seconds(t, mm, parse_spec("P(sum)"), parse_spec("R")),
               14 * (1.9e-6 + 64 * kMiB / 8 / 450e9));
  // DTensor refuses Shard -> Partial: the solver sees +infinity.
  EXPECT_EQ(m.redistribute_seconds(t, mm, parse_spec("S(0)"), parse_spec("P(sum)")),
            std::numeric_limits<double>::infinity());
  // A spec that does not fit the tensor is an error, not an infeasible transition.
  EXPECT_THROW(m.redistribute_seconds(t, mm, parse_spec("S(2)"), parse_spec("R")), InvalidArgument);
}

TEST(Redistribute, TwoDimMeshSumsPerDimSteps) {
  const CostModel m = make_cost_model("H100");
  const TensorMeta t{{4096, 4096}, DType::BFloat16};  // 32 MiB
  const Mesh mm = mesh({8, 8});
  // Every step is priced on its own mesh dim; the total is their sum whatever
  // the plan's order, and it includes at least the inter-node gather of dim 0
  // (8 shards of 512 x 512 bf16 = 4 MiB per rank at the end of that step).
  double sum = 0;
  for (const auto& step : plan_redistribute(t.shape, mm, parse_spec("S(0)S(1)"), parse_spec("RR")).steps)
    sum += m.step_seconds(step, mm, t.dtype);
  expect_close(m.redistribute_seconds(t, mm, parse_spec("S(0)S(1)"), parse_spec("RR")), sum);
  EXPECT_GT(sum, 7 * 4e-6);
}

// The runtime merges a chain of per-dim reductions into one collective over the combined
// group of their mesh dims (_runtime/fuse_reductions.py): the cost model prices that one.
TEST(Redistribute, AReductionOverTwoMeshDimsIsPricedAsTheOneCollectiveTheRuntimeIssues) {
  const CostModel m = make_cost_model("H100");
  const TensorMeta t{{4096, 4096}, DType::Float32};  // 64 MiB
  const Mesh mm = mesh({2, 4});
  const double bytes = 64 * kMiB;
  // P(sum) on both -> R on both: one all-reduce among the 8 ranks, not one per mesh dim.
  const double merged = m.redistribute_seconds(t, mm, parse_spec("P(sum)P(sum)"), parse_spec("RR"));
  expect_close(merged, m.collective_seconds(CollectiveKind::AllReduce, mesh({8}), 0, bytes));
  expect_close(merged, m.collective_seconds(CollectiveKind::AllReduce, mm, 0, 1, bytes));
  const double per_dim = m.collective_seconds(CollectiveKind::AllReduce, mm, 0, bytes) +
                         m.collective_seconds(CollectiveKind::AllReduce, mm, 1, bytes);
  EXPECT_NE(merged, per_dim);
  // A reduce-scatter onto one dim over both (8 whole pieces of 512 rows): one over 8 ranks.
  expect_close(m.redistribute_seconds(t, mm, parse_spec("P(sum)P(sum)"), parse_spec("S(0)S(0)")),
               m.collective_seconds(CollectiveKind::ReduceScatter, mesh({8}), 0, bytes));
  // And the gather back.
  expect_close(m.redistribute_seconds(t, mm, parse_spec("S(0)S(0)"), parse_spec("RR")),
               m.collective_seconds(CollectiveKind::AllGather, mesh({8}), 0, bytes));
  // A mesh dim of one rank between them changes nothing.
  expect_close(m.redistribute_seconds(t, mesh({2, 1, 4}), parse_spec("P(sum)RP(sum)"), parse_spec("RRR")), merged);
  // Gathers of different tensor dims stay two collectives.
  const auto steps = plan_redistribute(t.shape, mm, parse_spec("S(0)S(1)"), parse_spec("RR")).steps;
  ASSERT_EQ(steps.size(), 2u);
  expect_close(m.redistribute_seconds(t, mm, parse_spec("S(0)S(1)"), parse_spec("RR")),
               m.step_seconds(steps[0], mm, t.dtype) + m.step_seconds(steps[1], mm, t.dtype));
}

TEST(Redistribute, PaddedPiecesAndSeparateMeshDimsArePricedPerDim) {
  const CostModel m = make_cost_model("H100");
  const Mesh mm = mesh({2, 4});
  auto per_dim = [&](const TensorMeta& t, const char* src, const char* dst) {
    double sum = 0;
    for (const auto& step : plan_redistribute(t.shape, mm, parse_spec(src), parse_spec(dst)).steps)
      sum += m.step_seconds(step, mm, t.dtype);
    return sum;
  };
  // 4098 rows do not cut into 8 whole pieces: the runtime may keep two scatters.
  const TensorMeta padded{{4098, 4096}, DType::Float32};
  expect_close(m.redistribute_seconds(padded, mm, parse_spec("P(sum)P(sum)"), parse_spec("S(0)S(0)")),
               per_dim(padded, "P(sum)P(sum)", "S(0)S(0)"));
  // Reductions of different kinds are two collectives.
  const TensorMeta t{{4096, 4096}, DType::Float32};
  expect_close(m.redistribute_seconds(t, mm, parse_spec("P(max)P(max)"), parse_spec("RR")),
               m.collective_seconds(CollectiveKind::AllReduce, mesh({8}), 0, 64 * kMiB));
  expect_close(m.redistribute_seconds(t, mm, parse_spec("P(sum)P(sum)"), parse_spec("S(0)R")),
               per_dim(t, "P(sum)P(sum)", "S(0)R"));
  // Mesh dims 0 and 2 of a 3-D mesh are not one flattened dim: priced per dim.
  const Mesh cube = mesh({2, 2, 2});
  double sum = 0;
  for (const auto& step : plan_redistribute(t.shape, cube, parse_spec("P(sum)RP(sum)"), parse_spec("RRR")).steps)
    sum += m.step_seconds(step, cube, t.dtype);
  expect_close(m.redistribute_seconds(t, cube, parse_spec("P(sum)RP(sum)"), parse_spec("RRR")), sum);
  EXPECT_THROW(m.collective_seconds(CollectiveKind::AllReduce, cube, 2, 1, 1.0), InvalidArgument);
}

TEST(LocalBytes, LargestShard) {
  const CostModel m = make_cost_model("H100");
  const TensorMeta t{{10, 3}, DType::Float32};
  EXPECT_EQ(m.local_bytes(t, mesh({4}), parse_spec("S(0)")), 3 * 3 * 4);  // chunks 3,3,3,1
  EXPECT_EQ(m.local_bytes(t, mesh({4}), parse_spec("R")), 10 * 3 * 4);
  EXPECT_EQ(m.local_bytes(t, mesh({2, 2}), parse_spec("S(0)S(1)")), 5 * 2 * 4);
}

// ----------------------------------------------------------------- calibration

// all_gather on 2 ranks measured on the line latency 100 us, bandwidth 1 GB/s:
// t = 1 * 1e-4 + (1/2) * bytes / 1e9.
const char* kAllGatherProfile = R"({
  "version": 1,
  "meta": {"note": "hand-written"},
  "collectives": [
    {"collective": "all_gather", "group_size": 2, "bytes": 1000000, "seconds": 0.0006},
    {"collective": "all_gather", "group_size": 2, "bytes": 4000000, "seconds": 0.0021},
    {"collective": "all_gather", "group_size": 2, "bytes": 16000000, "seconds": 0.0081, "link": "intra"}
  ]
})";

TEST(Calibration, FitRecoversLatencyAndBandwidth) {
  const CostModel m = make_cost_model("H100", kAllGatherProfile);
  ASSERT_EQ(m.fits.size(), 1u);
  EXPECT_EQ(m.fits[0].kind, CollectiveKind::AllGather);
  EXPECT_FALSE(m.fits[0].inter);
  EXPECT_EQ(m.fits[0].samples, 3);
  EXPECT_NEAR(m.fits[0].latency, 1e-4, 1e-12);
  EXPECT_NEAR(m.fits[0].bandwidth, 1e9, 1e-3);
}

TEST(Calibration, FitReplacesTheFormulaConstantsForThatCollectiveOnly) {
  const CostModel plain = make_cost_model("H100");
  const CostModel m = make_cost_model("H100", kAllGatherProfile);
  // 64 MiB all-gather over 8 intra-node ranks: 7 * (100 us + 8 MiB / 1 GB/s) = 59.42 ms.
  EXPECT_NEAR(m.collective_seconds(CollectiveKind::AllGather, mesh({8}), 0, 64 * kMiB), 0.059420256, 1e-12);
  // Other collectives and the inter-node link keep the table's constants.
  EXPECT_EQ(m.collective_seconds(CollectiveKind::AllToAll, mesh({8}), 0, 64 * kMiB),
            plain.collective_seconds(CollectiveKind::AllToAll, mesh({8}), 0, 64 * kMiB));
  EXPECT_EQ(m.collective_seconds(CollectiveKind::AllGather, mesh({8, 8}), 0, 64 * kMiB),
            plain.collective_seconds(CollectiveKind::AllGather, mesh({8, 8}), 0, 64 * kMiB));
}

TEST(Calibration, AllReduceFitUsesTheRingForm) {
  // all_reduce on 4 ranks on the line latency 10 us, bandwidth 2 GB/s:
  // t = 2*3 * 1e-5 + 2*3/4 * bytes / 2e9.
  const std::string profile = R"({"collectives": [
    {"collective": "all_reduce", "group_size": 4, "bytes": 2000000, "seconds": 0.00156},
    {"collective": "all_reduce", "group_size": 4, "bytes": 8000000, "seconds": 0.00606}]})";
  const CostModel m = make_cost_model("A100", profile);
  ASSERT_EQ(m.fits.size(), 1u);
  EXPECT_NEAR(m.fits[0].latency, 1e-5, 1e-13);
  EXPECT_NEAR(m.fits[0].bandwidth, 2e9, 1e-3);
  // 1 KiB over 8 ranks: the ring form with the fitted constants, no tree shortcut.
  EXPECT_NEAR(m.collective_seconds(CollectiveKind::AllReduce, mesh({8}), 0, 1024), 14 * (1e-5 + 128 / 2e9), 1e-15);
}

TEST(Calibration, NegativeInterceptIsPinnedAtZeroLatency) {
  // Points on t = bytes / 1e9 - 1e-5 (steps = 1): least squares would give a
  // negative latency; the fit keeps latency 0 and refits the slope.
  const std::string profile = R"({"collectives": [
    {"collective": "all_to_all", "group_size": 2, "bytes": 2000000, "seconds": 0.00099},
    {"collective": "all_to_all", "group_size": 2, "bytes": 4000000, "seconds": 0.00199}]})";
  const CostModel m = make_cost_model("cpu", profile);
  ASSERT_EQ(m.fits.size(), 1u);
  EXPECT_EQ(m.fits[0].latency, 0.0);
  // slope = sum(w x t) / sum(w x^2) with x = bytes/2, w = 1/t^2 (relative error).
  const double x1 = 1e6, x2 = 2e6, t1 = 0.00099, t2 = 0.00199;
  const double w1 = 1 / (t1 * t1), w2 = 1 / (t2 * t2);
  EXPECT_NEAR(m.fits[0].bandwidth, (w1 * x1 * x1 + w2 * x2 * x2) / (w1 * x1 * t1 + w2 * x2 * t2), 1e-3);
}

TEST(Calibration, FitMinimisesRelativeErrorSoSmallCollectivesKeepTheirLatency) {
  // Gloo on a busy host: ~3 ms flat up to 2 MB, then 20 ms at 16 MB. No line fits all four;
  // an unweighted fit prices the 16 KB all-gather at 1.9 ms (45% low), the relative fit keeps
  // every size within 30% of its measurement.
  const std::string profile = R"({"topology": {"ranks_per_node": 4}, "collectives": [
    {"collective": "all_gather", "group_size": 4, "bytes": 16384, "seconds": 0.0034},
    {"collective": "all_gather", "group_size": 4, "bytes": 262144, "seconds": 0.0031},
    {"collective": "all_gather", "group_size": 4, "bytes": 2097152, "seconds": 0.0034},
    {"collective": "all_gather", "group_size": 4, "bytes": 16777216, "seconds": 0.0195}]})";
  const CostModel m = make_cost_model("cpu", profile);
  const Mesh mesh = make_mesh({4});
  for (const auto& [bytes, seconds] : std::vector<std::pair<double, double>>{
           {16384, 0.0034}, {262144, 0.0031}, {2097152, 0.0034}, {16777216, 0.0195}}) {
    const double priced = m.collective_seconds(CollectiveKind::AllGather, mesh, 0, bytes);
    EXPECT_NEAR(priced / seconds, 1.0, 0.3) << bytes;
  }
}

TEST(Calibration, DeviceAndTopologyOverrides) {
  const CostModel m = make_cost_model(
      "H100", R"({"device": {"peak_flops_bf16": 5e14, "kernel_overhead_s": 0},
                  "topology": {"ranks_per_node": 4, "intra_bandwidth": 1e11}})");
  EXPECT_EQ(m.device.peak_flops_bf16, 5e14);
  EXPECT_EQ(m.device.memory_bandwidth, 3.35e12);  // untouched
  expect_close(m.compute_seconds(OpWork{3.5e11, 0}, DType::BFloat16), 3.5e11 / (5e14 * 0.7));
  // 4 ranks per node: mesh (4,) stays intra at the new 100 GB/s.
  expect_close(m.collective_seconds(CollectiveKind::AllGather, mesh({4}), 0, 4e8), 3 * (1.9e-6 + 1e8 / 1e11));
  // mesh (8,) now spans two nodes.
  EXPECT_EQ(group_topology(mesh({8}), 0, m.topology.ranks_per_node).kind, GroupTopology::Kind::Hierarchical);
}

// Expects `fn` to throw E with `field` in its message.
template <typename E, typename F>
void expect_error(F fn, const std::string& field) {
  try {
    fn();
    ADD_FAILURE() << "expected an error naming " << field;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

TEST(Calibration, MalformedProfilesNameTheField) {
  auto load = [](const std::string& json) { return [json] { make_cost_model("H100", json); }; };
  expect_error<json::ParseError>(load("{\"device\": "), "calibration profile is not valid JSON");
  expect_error<json::SchemaError>(load("[1, 2]"), "calibration");
  expect_error<json::SchemaError>(load(R"({"devcie": {}})"), "unknown field 'devcie'");
  expect_error<json::SchemaError>(load(R"({"device": {"peak_flops_bf16": "fast"}})"),
                                  "calibration.device.peak_flops_bf16");
  expect_error<InvalidArgument>(load(R"({"device": {"memory_bandwidth": -1}})"), "calibration.device.memory_bandwidth");
  expect_error<InvalidArgument>(load(R"({"device": {"compute_efficiency": 1.5}})"),
                                "calibration.device.compute_efficiency");
  expect_error<InvalidArgument>(load(R"({"topology": {"ranks_per_node": 0}})"), "calibration.topology.ranks_per_node");
  expect_error<json::SchemaError>(load(R"({"topology": {"ranks_per_node": 2.5}})"),
                                  "calibration.topology.ranks_per_node");
  expect_error<InvalidArgument>(load(R"({"version": 2})"), "calibration.version");
  expect_error<json::SchemaError>(load(R"({"collectives": {}})"), "calibration.collectives");
  expect_error<InvalidArgument>(
      load(R"({"collectives": [{"collective": "broadcast", "group_size": 2, "bytes": 1, "seconds": 1}]})"),
      "calibration.collectives[0].collective");
  expect_error<json::SchemaError>(load(R"({"collectives": [{"collective": "all_gather", "bytes": 1, "seconds": 1}]})"),
                                  "missing field 'group_size'");
  expect_error<InvalidArgument>(
      load(R"({"collectives": [{"collective": "all_gather", "group_size": 2, "bytes": 1, "seconds": -0.5}]})"),
      "calibration.collectives[0].seconds");
  expect_error<InvalidArgument>(
      load(R"({"collectives": [{"collective": "all_gather", "group_size": 1, "bytes": 1, "seconds": 1}]})"),
      "calibration.collectives[0].group_size");
  expect_error<InvalidArgument>(
      load(R"({"collectives": [{"collective": "all_gather", "group_size": 2, "bytes": 1, "seconds": 1, "link": "x"}]})"),
      "calibration.collectives[0].link");
  // One size only: latency and bandwidth cannot both be fitted.
  expect_error<InvalidArgument>(
      load(R"({"collectives": [{"collective": "all_gather", "group_size": 2, "bytes": 100, "seconds": 1},
                              {"collective": "all_gather", "group_size": 2, "bytes": 100, "seconds": 2}]})"),
      "all_gather (intra): needs timings at two or more distinct sizes");
  // Time shrinking with bytes has no bandwidth.
  expect_error<InvalidArgument>(
      load(R"({"collectives": [{"collective": "all_gather", "group_size": 2, "bytes": 100, "seconds": 2},
                              {"collective": "all_gather", "group_size": 2, "bytes": 1000, "seconds": 1}]})"),
      "does not grow with bytes");
}

TEST(Calibration, BlankProfileMeansTableConstants) {
  const CostModel a = make_cost_model("B200", "  \n");
  EXPECT_TRUE(a.fits.empty());
  EXPECT_EQ(a.device.peak_flops_bf16, device_profile("B200").peak_flops_bf16);
}

}  // namespace
}  // namespace tlm
