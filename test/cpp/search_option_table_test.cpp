// The solver's option table (search_options.cpp) is the only place an option's
// name, bounds and meaning are written: these checks run over every row, so a
// new option is one row there and nothing here.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include "core/solver/search_options.h"

namespace tlm::solver {
namespace {

TEST(SearchOptionTable, EveryRowIsNamedOnceAndExplained) {
  std::set<std::string> names;
  for (const SearchOptionInfo& o : search_option_table()) {
    SCOPED_TRACE(o.name);
    EXPECT_TRUE(names.insert(o.name).second) << "duplicate option name";
    EXPECT_FALSE(std::string(o.meaning).empty());
    EXPECT_LE(o.lo, o.hi);
  }
  EXPECT_FALSE(names.empty());
}

TEST(SearchOptionTable, EveryDefaultIsWithinItsRowsBounds) {
  const SearchOptions defaults;
  for (const SearchOptionInfo& o : search_option_table()) {
    SCOPED_TRACE(o.name);
    const double v = defaults.*o.field;
    EXPECT_GE(v, o.lo);
    EXPECT_LE(v, o.hi);
    if (o.integer) EXPECT_EQ(v, std::floor(v));
  }
}

// Setting by name reaches the row's own field and enforces the row's bounds.
TEST(SearchOptionTable, SetByNameUsesEachRowsFieldAndBounds) {
  for (const SearchOptionInfo& o : search_option_table()) {
    SCOPED_TRACE(o.name);
    SearchOptions s;
    set_search_option(s, o.name, o.hi);
    EXPECT_EQ(s.*o.field, o.hi);
    set_search_option(s, o.name, o.lo);
    EXPECT_EQ(s.*o.field, o.lo);
    EXPECT_THROW(set_search_option(s, o.name, o.hi + 1), std::invalid_argument);
    EXPECT_THROW(set_search_option(s, o.name, o.lo - 1), std::invalid_argument);
    EXPECT_THROW(set_search_option(s, o.name, std::nan("")), std::invalid_argument);
    if (o.integer && o.lo + 0.5 <= o.hi) {
      EXPECT_THROW(set_search_option(s, o.name, o.lo + 0.5), std::invalid_argument);
    }
  }
}

}  // namespace
}  // namespace tlm::solver
