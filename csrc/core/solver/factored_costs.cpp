#include "core/solver/factored_costs.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "core/solver/trace.h"

namespace tlm::solver {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

uint64_t mix(uint64_t h, Cost c) {
  h ^= static_cast<uint64_t>(c);
  h *= 0xBF58476D1CE4E5B9ULL;
  return h ^ (h >> 31);
}

// Classes of equal lines (rows or columns) of an su x sv block: line i is
// entries M[first(i) + j * step] for j < len. Returns one representative per
// class in `reps` and the class of each line in `cls`.
void classes(const Cost* M, int count, int len, size_t line_step, size_t entry_step, std::vector<int>& cls,
             std::vector<int>& reps) {
  std::vector<uint64_t> h(static_cast<size_t>(count), 0x9E3779B97F4A7C15ULL);
  // Hash in memory order: for columns (entry_step == sv) walk row by row.
  if (entry_step == 1) {
    for (int i = 0; i < count; ++i)
      for (int j = 0; j < len; ++j) h[i] = mix(h[i], M[i * line_step + j]);
  } else {
    for (int j = 0; j < len; ++j)
      for (int i = 0; i < count; ++i) h[i] = mix(h[i], M[j * entry_step + i * line_step]);
  }
  auto equal = [&](int a, int b) {
    for (int j = 0; j < len; ++j)
      if (M[a * line_step + j * entry_step] != M[b * line_step + j * entry_step]) return false;
    return true;
  };
  cls.assign(static_cast<size_t>(count), -1);
  reps.clear();
  std::unordered_multimap<uint64_t, int> seen;  // hash -> class
  for (int i = 0; i < count; ++i) {
    auto [lo, hi] = seen.equal_range(h[i]);
    for (auto it = lo; it != hi && cls[i] < 0; ++it)
      if (equal(reps[static_cast<size_t>(it->second)], i)) cls[i] = it->second;
    if (cls[i] >= 0) continue;
    cls[i] = static_cast<int>(reps.size());
    seen.emplace(h[i], cls[i]);
    reps.push_back(i);
  }
}

FactoredBlock factor(const Cost* M, int su, int sv) {
  FactoredBlock b;
  std::vector<int> row_reps, col_reps;
  classes(M, su, sv, static_cast<size_t>(sv), 1, b.row, row_reps);
  classes(M, sv, su, 1, static_cast<size_t>(sv), b.col, col_reps);
  b.rows = static_cast<int>(row_reps.size());
  b.cols = static_cast<int>(col_reps.size());
  b.k.resize(static_cast<size_t>(b.rows) * b.cols);
  for (int r = 0; r < b.rows; ++r)
    for (int c = 0; c < b.cols; ++c) {
      const Cost x = M[static_cast<size_t>(row_reps[r]) * sv + col_reps[c]];
      b.k[static_cast<size_t>(r) * b.cols + c] = x == kInfiniteCost ? kInf : static_cast<double>(x);
    }
  return b;
}

}  // namespace

double min_plus(const double* row, const double* add, int n) {
  double m0 = kInf, m1 = kInf, m2 = kInf, m3 = kInf;
  int c = 0;
  for (; c + 4 <= n; c += 4) {
    m0 = std::min(m0, row[c] + add[c]);
    m1 = std::min(m1, row[c + 1] + add[c + 1]);
    m2 = std::min(m2, row[c + 2] + add[c + 2]);
    m3 = std::min(m3, row[c + 3] + add[c + 3]);
  }
  for (; c < n; ++c) m0 = std::min(m0, row[c] + add[c]);
  return std::min(std::min(m0, m1), std::min(m2, m3));
}

std::shared_ptr<const FactoredCosts> factor_edge_costs(const Model& m) {
  auto out = std::make_shared<FactoredCosts>();
  out->block_of_edge.resize(m.edges.size());
  std::map<std::tuple<size_t, int, int>, int> done;  // (offset, su, sv) -> block
  for (size_t e = 0; e < m.edges.size(); ++e) {
    const auto& ed = m.edges[e];
    const int su = m.num_strategies(ed.u), sv = m.num_strategies(ed.v);
    const auto key = std::make_tuple(ed.off, su, sv);
    auto it = done.find(key);
    if (it == done.end()) {
      it = done.emplace(key, static_cast<int>(out->blocks.size())).first;
      out->blocks.push_back(factor(&m.mat[ed.off], su, sv));
    }
    out->block_of_edge[e] = it->second;
  }
  if (trace_on()) {
    size_t full = 0, factored = 0;
    for (size_t e = 0; e < m.edges.size(); ++e) {
      const FactoredBlock& b = out->of(static_cast<int>(e));
      full += b.row.size() * b.col.size();
      factored += b.k.size() + b.row.size() + b.col.size();
    }
    trace("factored edge costs: %zu blocks; a pass reads %zu entries instead of %zu", out->blocks.size(), factored,
          full);
  }
  return out;
}

}  // namespace tlm::solver
