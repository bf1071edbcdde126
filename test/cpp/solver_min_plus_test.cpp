// The SIMD min-plus kernels (solver/min_plus.h) against plain loops: every shape, including
// the tails the vector loops leave, +inf entries and rows, negative potentials. Min and one
// addition are exact, so the kernels must agree with the loops to the bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/solver/min_plus.h"

namespace tlm::solver {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> random_entries(std::mt19937_64& rng, size_t n, double inf_share) {
  std::uniform_real_distribution<double> u(-1e12, 1e12), coin(0, 1);
  std::vector<double> v(n);
  for (double& x : v) x = coin(rng) < inf_share ? kInf : u(rng);
  return v;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_plain_loops_results() {
  std::mt19937_64 rng(7);
  for (int rows = 1; rows <= 9; ++rows)
    for (int cols = 0; cols <= 37; ++cols)
      for (double inf_share : {0.0, 0.3, 1.0}) {
        // Offset by one entry: the kernels' loads must not assume alignment.
        std::vector<double> k = random_entries(rng, static_cast<size_t>(rows * cols) + 1, inf_share);
        std::vector<double> add_c = random_entries(rng, static_cast<size_t>(cols) + 1, inf_share / 2);
        std::vector<double> add_r = random_entries(rng, static_cast<size_t>(rows), inf_share / 2);
        const double* K = k.data() + 1;
        const double* ac = add_c.data() + 1;
        std::vector<double> got(static_cast<size_t>(std::max(rows, cols)), -1.0);
        row_min_plus(K, rows, cols, ac, got.data());
        for (int r = 0; r < rows; ++r) {
          double want = kInf;
          for (int c = 0; c < cols; ++c) want = std::min(want, K[r * cols + c] + ac[c]);
          ASSERT_TRUE(same_bits(got[r], want)) << rows << "x" << cols << " row " << r;
          ASSERT_TRUE(same_bits(min_plus(K + r * cols, ac, cols), want)) << rows << "x" << cols << " row " << r;
        }
        std::fill(got.begin(), got.end(), -1.0);  // col_min_plus must overwrite
        col_min_plus(K, rows, cols, add_r.data(), got.data());
        for (int c = 0; c < cols; ++c) {
          double want = kInf;
          for (int r = 0; r < rows; ++r) want = std::min(want, K[r * cols + c] + add_r[r]);
          ASSERT_TRUE(same_bits(got[c], want)) << rows << "x" << cols << " column " << c;
        }
      }
}

// Every path this CPU can run, the default last (it stays chosen for the other tests).
TEST(MinPlus, RowsAndColumnsMatchPlainLoops) {
  const std::string chosen = min_plus_isa();
  int paths = 0;
  for (const char* isa : {"scalar", "sse2", "avx"}) {
    if (!use_min_plus_isa(isa)) continue;
    ++paths;
    SCOPED_TRACE(isa);
    expect_plain_loops_results();
  }
  EXPECT_GE(paths, 1);
  ASSERT_TRUE(use_min_plus_isa(chosen));
  EXPECT_FALSE(use_min_plus_isa("avx512-vnni"));
}

TEST(MinPlus, NamesItsInstructionSet) {
  const std::string isa = min_plus_isa();
  EXPECT_TRUE(isa == "avx" || isa == "sse2" || isa == "scalar") << isa;
}

}  // namespace
}  // namespace tlm::solver
