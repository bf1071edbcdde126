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

// Where a block's data sits in the pools until they stop growing.
struct Offsets {
  size_t k = 0, row = 0, col = 0;
};

Offsets factor(const Cost* M, int su, int sv, FactoredBlock& b, FactoredCosts& out) {
  std::vector<int> row_cls, col_cls, row_reps, col_reps;
  classes(M, su, sv, static_cast<size_t>(sv), 1, row_cls, row_reps);
  classes(M, sv, su, 1, static_cast<size_t>(sv), col_cls, col_reps);
  b.rows = static_cast<int>(row_reps.size());
  b.cols = static_cast<int>(col_reps.size());
  b.identity_rows = b.rows == su;  // classes are numbered in first-seen order
  b.identity_cols = b.cols == sv;
  Offsets at{out.k_pool.size(), out.class_pool.size(), out.class_pool.size() + row_cls.size()};
  out.class_pool.insert(out.class_pool.end(), row_cls.begin(), row_cls.end());
  out.class_pool.insert(out.class_pool.end(), col_cls.begin(), col_cls.end());
  for (int r = 0; r < b.rows; ++r)
    for (int c = 0; c < b.cols; ++c) {
      const Cost x = M[static_cast<size_t>(row_reps[r]) * sv + col_reps[c]];
      out.k_pool.push_back(x == kInfiniteCost ? kInf : static_cast<double>(x));
    }
  return at;
}

}  // namespace

std::shared_ptr<const FactoredCosts> factor_edge_costs(const Model& m) {
  auto out = std::make_shared<FactoredCosts>();
  out->block_of_edge.resize(m.edges.size());
  std::map<std::tuple<size_t, int, int>, int> done;  // (offset, su, sv) -> block
  std::vector<Offsets> offsets;
  for (size_t e = 0; e < m.edges.size(); ++e) {
    const auto& ed = m.edges[e];
    const int su = m.num_strategies(ed.u), sv = m.num_strategies(ed.v);
    const auto key = std::make_tuple(ed.off, su, sv);
    auto it = done.find(key);
    if (it == done.end()) {
      it = done.emplace(key, static_cast<int>(out->blocks.size())).first;
      out->blocks.emplace_back();
      offsets.push_back(factor(&m.mat[ed.off], su, sv, out->blocks.back(), *out));
    }
    out->block_of_edge[e] = it->second;
  }
  for (size_t b = 0; b < out->blocks.size(); ++b) {  // the pools are final now
    out->blocks[b].k = out->k_pool.data() + offsets[b].k;
    out->blocks[b].row = out->class_pool.data() + offsets[b].row;
    out->blocks[b].col = out->class_pool.data() + offsets[b].col;
  }
  if (trace_on()) {
    size_t full = 0, factored = 0;
    for (size_t e = 0; e < m.edges.size(); ++e) {
      const FactoredBlock& b = out->of(static_cast<int>(e));
      const size_t su = static_cast<size_t>(m.num_strategies(m.edges[e].u)), sv = static_cast<size_t>(m.num_strategies(m.edges[e].v));
      full += su * sv;
      factored += static_cast<size_t>(b.rows) * b.cols + su + sv;
    }
    trace("factored edge costs: %zu blocks (%zu pooled entries); a pass reads %zu entries instead of %zu (%s)",
          out->blocks.size(), out->k_pool.size(), factored, full, min_plus_isa());
  }
  return out;
}

}  // namespace tlm::solver
