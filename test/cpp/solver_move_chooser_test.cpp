// MoveChooser: the region search's measured pick between exact regions and
// bursts of kicks (move_chooser.h).
#include <gtest/gtest.h>

#include "core/solver/move_chooser.h"

namespace tlm::solver {
namespace {

TEST(MoveChooser, TriesRegionsThenKicksBeforeAnythingIsMeasured) {
  MoveChooser c(4, 5);
  EXPECT_EQ(c.next(), MoveChooser::kRegion);
  c.record(MoveChooser::kRegion, 0, 1.0);
  EXPECT_EQ(c.next(), MoveChooser::kKicks);
}

TEST(MoveChooser, PicksTheMoveThatRemovedMoreCostPerSecond) {
  MoveChooser c(4, 1000);
  c.record(MoveChooser::kRegion, 100, 2.0);  // 50 per second
  c.record(MoveChooser::kKicks, 30, 0.25);   // 120 per second
  EXPECT_DOUBLE_EQ(c.rate(MoveChooser::kKicks), 120);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(c.next(), MoveChooser::kKicks);
  c.record(MoveChooser::kRegion, 1000, 1.0);  // regions now (1100 / 3 s) pay more
  EXPECT_EQ(c.next(), MoveChooser::kRegion);
}

TEST(MoveChooser, ExploresTheOtherMoveEveryFewChoices) {
  MoveChooser c(4, 3);
  c.record(MoveChooser::kRegion, 0, 1.0);
  c.record(MoveChooser::kKicks, 10, 1.0);
  int regions = 0;
  for (int i = 0; i < 9; ++i) regions += c.next() == MoveChooser::kRegion;
  EXPECT_EQ(regions, 3);  // the 3rd, 6th and 9th measured choices
  EXPECT_EQ(c.times_chosen(MoveChooser::kKicks), 6);
}

TEST(MoveChooser, ForgetsRunsOutsideItsWindow) {
  MoveChooser c(2, 1000);
  c.record(MoveChooser::kKicks, 1000, 1.0);
  c.record(MoveChooser::kKicks, 0, 1.0);
  c.record(MoveChooser::kKicks, 0, 1.0);  // the 1000 fell out of the window
  EXPECT_DOUBLE_EQ(c.rate(MoveChooser::kKicks), 0);
  c.record(MoveChooser::kRegion, -5, 1.0);  // a worse labelling counts as no gain
  EXPECT_DOUBLE_EQ(c.rate(MoveChooser::kRegion), 0);
  EXPECT_EQ(c.next(), MoveChooser::kRegion);  // ties go to regions
}

}  // namespace
}  // namespace tlm::solver
