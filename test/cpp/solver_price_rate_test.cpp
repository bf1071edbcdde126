// The price phase's step rate (search.h, next_price_rate): it grows while the decoded
// labelling stays over the memory limit, shrinks while it fits, and halves whenever the
// labelling flips between the two, so that a price swinging across the level where many
// tied nodes change together closes in on it instead of overshooting both ways.
#include <gtest/gtest.h>

#include <optional>

#include "core/solver/search.h"

namespace tlm::solver {
namespace {

TEST(PriceRate, GrowsWhileOverAndShrinksWhileUnder) {
  EXPECT_DOUBLE_EQ(next_price_rate(0.5, true, std::nullopt), 0.6);
  EXPECT_DOUBLE_EQ(next_price_rate(0.5, true, true), 0.6);
  EXPECT_DOUBLE_EQ(next_price_rate(0.5, false, std::nullopt), 0.35);
  EXPECT_DOUBLE_EQ(next_price_rate(0.5, false, false), 0.35);
}

TEST(PriceRate, HalvesOnAFlipEitherWay) {
  EXPECT_DOUBLE_EQ(next_price_rate(0.5, true, false), 0.25);
  EXPECT_DOUBLE_EQ(next_price_rate(0.5, false, true), 0.25);
}

TEST(PriceRate, StaysWithinItsRange) {
  EXPECT_DOUBLE_EQ(next_price_rate(4.0, true, true), 4.0);
  EXPECT_DOUBLE_EQ(next_price_rate(0.01, false, false), 0.01);
  EXPECT_DOUBLE_EQ(next_price_rate(0.015, true, false), 0.01);
}

TEST(PriceRate, AlternatingOverflowShrinksTheRateGeometrically) {
  // The swing the halving is for: over, under, over, ... for twenty iterations takes the
  // rate to its floor, where growing by 1.2 and shrinking by 0.7 alone (0.84 a pair) would
  // leave it at 0.087, still swinging.
  double rate = 0.5;
  std::optional<bool> before;
  for (int it = 0; it < 20; ++it) {
    const bool over = it % 2 == 0;
    rate = next_price_rate(rate, over, before);
    before = over;
  }
  EXPECT_DOUBLE_EQ(rate, 0.01);
}

}  // namespace
}  // namespace tlm::solver
