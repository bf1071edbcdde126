#include "core/fold_blocks.h"

#include <gtest/gtest.h>

namespace tlm {
namespace {

TEST(FoldSeconds, ThreeQuartersUnderAShortLimitHalfUnderALongOne) {
  EXPECT_DOUBLE_EQ(fold_seconds(4.0), 3.0);      // short: the full solve's setup would use its half
  EXPECT_DOUBLE_EQ(fold_seconds(12.0), 7.5);     // between: enough for the folded plan, the rest certifies
  EXPECT_DOUBLE_EQ(fold_seconds(30.0), 15.0);    // long: half each
  for (double s = 0.5; s < 40; s += 0.5) {       // never less than half, never more than three quarters
    EXPECT_GE(fold_seconds(s), 0.5 * s);
    EXPECT_LE(fold_seconds(s), 0.75 * s);
  }
}

TEST(BlockBoundBesideFullSeconds, ATenthOfTheLimitBetweenOneAndThreeSeconds) {
  EXPECT_DOUBLE_EQ(block_bound_beside_full_seconds(5.0), 1.0);    // a short full solve: its one second
  EXPECT_DOUBLE_EQ(block_bound_beside_full_seconds(20.0), 2.0);   // a tenth
  EXPECT_DOUBLE_EQ(block_bound_beside_full_seconds(150.0), 3.0);  // it levels off in about that: the solve keeps the rest
}

TEST(FoldTailSeconds, AFifthOfALongEnoughFoldAtMostThreeSeconds) {
  EXPECT_DOUBLE_EQ(fold_tail_seconds(3.4), 0.0);  // 70B at 10 s end to end: the fold keeps its time
  EXPECT_DOUBLE_EQ(fold_tail_seconds(5.0), 1.0);  // 70B at a 10 s limit: a fifth
  EXPECT_DOUBLE_EQ(fold_tail_seconds(30.0), 3.0);
  for (double s = 4.0; s < 40; s += 0.5) EXPECT_LE(fold_tail_seconds(s), 0.2 * s + 1e-12);
}

}  // namespace
}  // namespace tlm
