// The cost tables: RedistCostCache plans each spec pair once and prices it
// per tensor meta from cached shard bytes (held here to the checked path,
// CostModel::redistribute_seconds, to the picosecond); equal edges share one
// matrix in the problem.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/cost_tables.h"
#include "core/planner.h"
#include "core/solver/problem.h"

namespace tlm {
namespace {

// Every spec of a rank-`ndim` tensor on a mesh of `mesh_ndim` dims whose
// placements are Replicate, Shard(d) or Partial(sum / max / avg).
std::vector<PlacementSpec> every_spec(int ndim, size_t mesh_ndim) {
  std::vector<Placement> one{Placement::replicate(), Placement::partial(ReduceOp::Sum),
                             Placement::partial(ReduceOp::Max), Placement::partial(ReduceOp::Avg)};
  for (int d = 0; d < ndim; ++d) one.push_back(Placement::shard(d));
  std::vector<PlacementSpec> out{PlacementSpec{}};
  for (size_t md = 0; md < mesh_ndim; ++md) {
    std::vector<PlacementSpec> next;
    for (const auto& prefix : out)
      for (const auto& p : one) {
        PlacementSpec s = prefix;
        s.push_back(p);
        next.push_back(s);
      }
    out = std::move(next);
  }
  return out;
}

void expect_cache_matches_checked_path(const std::vector<int64_t>& mesh_shape, const std::vector<TensorMeta>& metas) {
  const CostModel cm = make_cost_model("H100");
  const Mesh mesh = make_mesh(mesh_shape);
  RedistCostCache cache(cm, mesh);
  int refused = 0, priced = 0;
  for (const TensorMeta& t : metas) {
    const auto specs = every_spec(static_cast<int>(t.ndim()), mesh.ndim());
    for (const auto& src : specs)
      for (const auto& dst : specs) {
        if (src == dst) continue;  // free by definition, even for specs DTensor rejects
        const solver::Cost want = to_cost(cm.redistribute_seconds(t, mesh, src, dst));
        ASSERT_EQ(cache.get(t, src, dst), want) << to_string(src) << " -> " << to_string(dst) << " on "
                                                << mesh.to_string();
        (want == solver::kInfiniteCost ? refused : priced)++;
      }
  }
  EXPECT_GT(refused, 0);  // both outcomes were exercised
  EXPECT_GT(priced, 0);
}

TEST(RedistCostCache, EqualsTheCheckedPathOnA3DMeshWithUnevenShapes) {
  // Uneven sizes (7, 5) pad shards differently per spec; two metas of one rank
  // share every pair plan but not their bytes.
  expect_cache_matches_checked_path({2, 3, 4}, {TensorMeta{{7, 5}, DType::BFloat16}, TensorMeta{{8, 12}, DType::Float32}});
}

TEST(RedistCostCache, EqualsTheCheckedPathWhereTheRuntimeMergesStepsOfTwoMeshDims) {
  // (8, 12) cuts into whole pieces over both dims, so reductions, scatters and gathers over
  // both merge into one collective; (6, 5) does not for some.
  expect_cache_matches_checked_path({2, 4}, {TensorMeta{{8, 12}, DType::Float32}, TensorMeta{{6, 5}, DType::BFloat16}});
}

TEST(RedistCostCache, EqualsTheCheckedPathWithASizeOneMeshDim) {
  // DTensor skips steps on a size-1 mesh dim; the cache's pair plans must too.
  expect_cache_matches_checked_path({4, 1, 2}, {TensorMeta{{6, 3, 10}, DType::Float32}});
}

TEST(RedistCostCache, NegativeDimsAndOutOfRangeDimsTakeTheCheckedPath) {
  const CostModel cm = make_cost_model("H100");
  const Mesh mesh = make_mesh({2, 2});
  RedistCostCache cache(cm, mesh);
  const TensorMeta t{{6, 8}, DType::Float32};
  const PlacementSpec last{Placement::shard(-1), Placement::replicate()};
  const PlacementSpec first{Placement::shard(0), Placement::replicate()};
  EXPECT_EQ(cache.get(t, last, first), to_cost(cm.redistribute_seconds(t, mesh, last, first)));
  EXPECT_GT(cache.get(t, last, first), 0);
  const PlacementSpec out_of_range{Placement::shard(2), Placement::replicate()};
  EXPECT_THROW(cache.get(t, out_of_range, first), InvalidArgument);
}

TEST(RedistCostCache, ABucketedReductionPaysItsShareOfOneCollectivesLatencyByBytes) {
  // A gradient the runtime reduces in a bucket of B bytes: its all-reduce costs the
  // bandwidth term plus latency x bytes / B plus its copy into the bucket's flat buffer,
  // less than unbucketed, and the same once it fills a bucket alone (reduced in place,
  // not copied) or without buckets.
  const CostModel cm = make_cost_model("H100");
  const Mesh mesh = make_mesh({8});
  const PlacementSpec partial{Placement::partial(ReduceOp::Sum)}, rep{Placement::replicate()};
  const TensorMeta small{{256, 256}, DType::Float32}, big{{4096, 4096}, DType::Float32};  // 256 KiB, 64 MiB
  const double bucket = 25 << 20;
  RedistCostCache cache(cm, mesh);
  auto bucketed = [&](const TensorMeta& t) {
    return cache.get(cache.meta_id(t, BucketShare{static_cast<int64_t>(bucket), false}), cache.spec_id(partial),
                     cache.spec_id(rep));
  };
  const double latency = cm.collective_seconds(CollectiveKind::AllReduce, mesh, 0, 1);
  ASSERT_GT(latency, 0);
  const double whole = cm.redistribute_seconds(small, mesh, partial, rep);
  EXPECT_EQ(cache.get(small, partial, rep), to_cost(whole));  // the plain meta is unchanged
  const double copy = cm.bucket_copy_seconds(256.0 * 1024);
  EXPECT_NEAR(copy, 2 * 256.0 * 1024 / (cm.device.memory_bandwidth * cm.device.memory_efficiency), 1e-15);
  EXPECT_GT(copy, 0);
  EXPECT_NEAR(to_seconds(bucketed(small)), whole - (1 - 256.0 * 1024 / bucket) * latency + copy, 1e-9);
  EXPECT_LT(bucketed(small), cache.get(small, partial, rep));
  EXPECT_EQ(bucketed(big), cache.get(big, partial, rep));  // 64 MiB fills a bucket of its own

  // A bucket of 0 bytes is none: the runtime merges nothing.
  EXPECT_EQ(cache.get(cache.meta_id(small, BucketShare{0, false}), cache.spec_id(partial), cache.spec_id(rep)),
            to_cost(whole));
}

TEST(RedistCostCache, AParameterGatherPaysItsShareOfItsUnitsBucketAndBothCopies) {
  // A parameter gathered in its unit's bucket of U bytes: latency x gathered bytes / U, its
  // shard copied into the flat buffer and its column copied out (bucketing.py's _merge).
  // Only gathers join that bucket: a parameter's other collectives are priced alone.
  const CostModel cm = make_cost_model("H100");
  const Mesh mesh = make_mesh({8});
  const PlacementSpec shard0{Placement::shard(0)}, shard1{Placement::shard(1)}, rep{Placement::replicate()};
  const TensorMeta w{{256, 256}, DType::Float32};  // 256 KiB gathered
  const double unit = 4 << 20;
  RedistCostCache cache(cm, mesh);
  const int member = cache.meta_id(w, BucketShare{static_cast<int64_t>(unit), true});
  const double whole = cm.redistribute_seconds(w, mesh, shard0, rep);
  const double latency = cm.collective_seconds(CollectiveKind::AllGather, mesh, 0, 1);
  ASSERT_GT(latency, 0);
  const double copies = cm.bucket_copy_seconds(256.0 * 1024 / 8) + cm.bucket_copy_seconds(256.0 * 1024);
  EXPECT_NEAR(to_seconds(cache.get(member, cache.spec_id(shard0), cache.spec_id(rep))),
              whole - (1 - 256.0 * 1024 / unit) * latency + copies, 1e-9);
  EXPECT_LT(cache.get(member, cache.spec_id(shard0), cache.spec_id(rep)), cache.get(w, shard0, rep));
  EXPECT_EQ(cache.get(member, cache.spec_id(shard0), cache.spec_id(shard1)), cache.get(w, shard0, shard1));
  // The same gather in a smaller unit's bucket pays a larger share.
  const int small_unit = cache.meta_id(w, BucketShare{static_cast<int64_t>(unit / 4), true});
  EXPECT_GT(cache.get(small_unit, cache.spec_id(shard0), cache.spec_id(rep)),
            cache.get(member, cache.spec_id(shard0), cache.spec_id(rep)));
  // Gathered, it fills a bucket of 128 KiB by itself (though its shard does not): issued
  // alone, no copies.
  const int filled = cache.meta_id(w, BucketShare{128 << 10, true});
  EXPECT_EQ(cache.get(filled, cache.spec_id(shard0), cache.spec_id(rep)), cache.get(w, shard0, rep));
}

}  // namespace
}  // namespace tlm

namespace tlm {
namespace {

// x (input) -> relu -> relu -> ... (`layers` of them) -> sum; the relu at
// index `flagged` (-1: none) takes its input without redistribution.
std::string relu_chain(int layers, int flagged) {
  const std::string t = R"({"shape": [64, 32], "dtype": "float32"})";
  std::string nodes = R"({"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [)" + t + "]}";
  for (int k = 0; k < layers; ++k) {
    nodes += R"(, {"name": "r)" + std::to_string(k) + R"(", "op": "aten.relu.default", "args": [{"t": [)" +
             std::to_string(k) + R"(, 0]}], "outputs": [)" + t + "]" +
             (k == flagged ? R"(, "extra": {"no_input_redistribution": true})" : "") + "}";
  }
  nodes += R"(, {"name": "loss", "op": "aten.sum.default", "args": [{"t": [)" + std::to_string(layers) +
           R"(, 0]}], "outputs": [{"shape": [], "dtype": "float32"}]})";
  nodes += R"(, {"name": "output", "op": "output", "args": [[{"t": [)" + std::to_string(layers + 1) +
           R"(, 0]}]], "extra": {"roles": ["output"], "targets": ["0"]}})";
  return R"({"mesh": {"shape": [2, 2]}, "nodes": [)" + nodes + "]}";
}

TEST(CostTables, EqualEdgesShareOneMatrix) {
  // relu k -> relu k+1 edges have the same tensor meta and the same spec lists
  // on both ends: the problem holds one matrix for all of them.
  const solver::Problem p = planner_problem(read_graph(relu_chain(6, -1)), PlanOptions{});
  std::set<const std::vector<solver::Cost>*> between_relus;
  for (const auto& e : p.edges)
    if (e.u >= 1 && e.v <= 6 && e.v == e.u + 1) between_relus.insert(e.costs.get());
  EXPECT_EQ(between_relus.size(), 1u);
  solver::validate(p);
}

TEST(CostTables, AnInputRuleGivesTheEdgeItsOwnMatrix) {
  // The flagged relu's input edge forbids collectives: same meta and specs as
  // its neighbours' edges, but not the same matrix.
  const solver::Problem plain = planner_problem(read_graph(relu_chain(6, -1)), PlanOptions{});
  const solver::Problem flagged = planner_problem(read_graph(relu_chain(6, 3)), PlanOptions{});
  auto edge = [](const solver::Problem& p, int u, int v) -> const std::vector<solver::Cost>& {
    for (const auto& e : p.edges)
      if (e.u == u && e.v == v) return *e.costs;
    throw std::runtime_error("no edge");
  };
  const auto& into_flagged = edge(flagged, 3, 4);
  EXPECT_NE(&into_flagged, &edge(flagged, 2, 3));
  EXPECT_EQ(edge(flagged, 2, 3), edge(plain, 2, 3));
  int forbidden = 0;
  for (size_t k = 0; k < into_flagged.size(); ++k) {
    if (into_flagged[k] == solver::kInfiniteCost) ++forbidden;
    else EXPECT_EQ(into_flagged[k], edge(plain, 3, 4)[k]);
  }
  EXPECT_GT(forbidden, 0);
}

}  // namespace
}  // namespace tlm
