#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "core/region.h"

using namespace tlm;

namespace {

RegionValue tensor(std::vector<int64_t> shape, std::optional<std::string> actual = std::nullopt) {
  RegionValue v;
  v.is_tensor = true;
  v.type_name = "Tensor";
  v.shape = std::move(shape);
  v.actual = std::move(actual);
  return v;
}

RegionValue scalar() {
  RegionValue v;
  v.type_name = "float";
  return v;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Region, InputLayoutsForEveryRank) {
  Mesh mesh = make_mesh({2, 2}, {"dp", "tp"});
  auto plan = plan_region_inputs(mesh, {tensor({8, 6}), scalar()}, {"S(0)S(1)", std::nullopt}, false, true);
  ASSERT_EQ(plan.layouts.size(), 4u);
  EXPECT_EQ(plan.layouts[0][0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(plan.layouts[3][0].offset, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(plan.layouts[1][0].offset, (std::vector<int64_t>{0, 3}));
  EXPECT_FALSE(plan.specs[1].has_value());
  EXPECT_TRUE(plan.redistribute.empty());
}

TEST(Region, InputErrorsNameTheArgument) {
  Mesh mesh = make_mesh({2, 2});
  EXPECT_NE(message_of([&] { plan_region_inputs(mesh, {tensor({4})}, {"S(0)R", "RR"}, false, false); })
                .find("in_placements has 2 entries but the region has 1 arguments"),
            std::string::npos);
  EXPECT_NE(message_of([&] { plan_region_inputs(mesh, {tensor({4}), scalar()}, {"S(0)R", "RR"}, false, false); })
                .find("in_placements[1]: argument 1 is not a tensor (float)"),
            std::string::npos);
  EXPECT_NE(message_of([&] { plan_region_inputs(mesh, {tensor({4})}, {std::nullopt}, false, false); })
                .find("argument 0 is a tensor of shape [4] but its placements are None"),
            std::string::npos);
  EXPECT_NE(message_of([&] { plan_region_inputs(mesh, {tensor({4, 4})}, {"RS(2)"}, false, false); })
                .find("in_placements[0]"),
            std::string::npos);
  std::string m = message_of([&] { plan_region_inputs(mesh, {tensor({4, 4}, "RR")}, {"S(0)R"}, false, false); });
  EXPECT_NE(m.find("argument 0 has placements RR but in_placements[0] expects S(0)R"), std::string::npos) << m;
  auto plan = plan_region_inputs(mesh, {tensor({4, 4}, "RR"), tensor({4}, "S(0)R")}, {"S(0)R", "S(0)R"}, true, false);
  EXPECT_EQ(plan.redistribute, (std::vector<int>{0}));
}

TEST(Region, OutputGlobalShapesAndRankChecks) {
  Mesh mesh = make_mesh({2, 2});
  auto plan = plan_region_outputs(mesh, {tensor({4, 3}), tensor({5})}, {"S(0)S(1)", "P(sum)R"}, {});
  EXPECT_EQ(plan.global_shapes[0], (std::vector<int64_t>{8, 6}));
  EXPECT_EQ(plan.global_shapes[1], (std::vector<int64_t>{5}));
  auto all = plan_region_outputs(mesh, {tensor({4, 3})}, {"S(0)S(1)"}, {{{4, 3}}, {{4, 3}}, {{4, 3}}});
  EXPECT_EQ(all.offsets[3][0], (std::vector<int64_t>{4, 3}));
  std::string m = message_of([&] { plan_region_outputs(mesh, {tensor({3, 4})}, {"RS(0)"}, {{{2, 4}}}); });
  EXPECT_NE(m.find("output 0 on rank 1"), std::string::npos) << m;
  EXPECT_NE(message_of([&] { plan_region_outputs(mesh, {tensor({3})}, {"RR", "RR"}, {}); })
                .find("out_placements has 2 entries but the region has 1 outputs"),
            std::string::npos);
}

TEST(Region, GradSpecTurnsPartialIntoReplicate) {
  EXPECT_EQ(to_string(grad_spec(parse_spec("S(0)P(sum)P(avg)R"))), "S(0)RRR");
}
