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

}  // namespace
}  // namespace tlm
