#include "core/solver/forest.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "core/solver/cost_math.h"
#include "core/solver/factored_costs.h"
#include "core/solver/trace.h"

namespace tlm::solver {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> as_doubles(const std::vector<Cost>& mat) {
  std::vector<double> d(mat.size());
  for (size_t k = 0; k < mat.size(); ++k) d[k] = mat[k] == kInfiniteCost ? kInf : static_cast<double>(mat[k]);
  return d;
}
}  // namespace

ForestMoves::ForestMoves(const Model& m, const Coarsening& c)
    : m_(m),
      c_(c),
      cm_(c.coarse),
      in_forest_(c.coarse.n, -1),
      parent_(c.coarse.n, -2),
      parent_edge_(c.coarse.n, -1),
      dsu_(c.coarse.n, 0),
      matd_(as_doubles(c.coarse.mat)),
      allow_(m.n, 0) {}

ForestMoves::ForestMoves(const Model& m)
    : ForestMoves(m, std::make_unique<Coarsening>(identity_coarsening(m, /*with_edges=*/false))) {}

ForestMoves::ForestMoves(const Model& m, std::unique_ptr<Coarsening> own)
    : m_(m),
      own_(std::move(own)),
      c_(*own_),
      cm_(m),
      in_forest_(m.n, -1),
      parent_(m.n, -2),
      parent_edge_(m.n, -1),
      dsu_(m.n, 0),
      matd_(as_doubles(m.mat)),
      allow_(m.n, 0) {}

__int128 ForestMoves::move_group(Primal& primal, int g, int r, std::vector<std::pair<int, int>>* undo) const {
  __int128 d = 0;
  for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
    const int i = c_.members[sl];
    const int s = c_.fine_strategy(sl, r);
    const int cur = primal.labels()[i];
    if (s == cur) continue;
    d += primal.delta(i, s);
    if (undo) undo->emplace_back(i, cur);
    primal.move(i, s);
  }
  return d;
}

std::optional<__int128> ForestMoves::group_delta(const std::vector<int>& x, int g, int cur, int r) const {
  __int128 d = static_cast<__int128>(cm_.cost[cm_.off[g] + r]) - cm_.cost[cm_.off[g] + cur];
  for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
    const int i = c_.members[sl];
    const int s = c_.fine_strategy(sl, r);
    if (s == x[i]) continue;
    for (size_t a = m_.adj_off[i]; a < m_.adj_off[i + 1]; ++a) {
      const auto& e = m_.edges[m_.adj[a]];
      const int j = e.u == i ? e.v : e.u;
      if (c_.group_of[j] == g) continue;
      const int sv = m_.num_strategies(e.v);
      Cost now = e.u == i ? m_.mat[e.off + static_cast<size_t>(x[i]) * sv + x[j]] : m_.mat[e.off + static_cast<size_t>(x[j]) * sv + x[i]];
      Cost then = e.u == i ? m_.mat[e.off + static_cast<size_t>(s) * sv + x[j]] : m_.mat[e.off + static_cast<size_t>(x[j]) * sv + s];
      if (then == kInfiniteCost) return std::nullopt;
      d += static_cast<__int128>(then) - (now == kInfiniteCost ? 0 : now);
    }
  }
  return d;
}

__int128 ForestMoves::saved_at(const std::vector<int>& x, int g, int r, int k) const {
  __int128 saved = 0;
  for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
    const int i = c_.members[sl];
    if (m_.plo[i] <= k && k < m_.phi[i]) saved += m_.usage[m_.off[i] + x[i]] - m_.usage[m_.off[i] + c_.fine_strategy(sl, r)];
  }
  return saved;
}

bool ForestMoves::repair(Primal& primal) {
  if (primal.memory_ok()) return true;
  const auto t0 = Clock::now();
  std::vector<int> stamp(cm_.n, -1), groups;
  for (int guard = 0; guard < 2 * cm_.n + 16 && !primal.memory_ok(); ++guard) {
    if ((guard & 15) == 15 && Clock::now() - t0 > std::chrono::seconds(2)) return false;  // too slow here: give up
    const size_t k = primal.slack_tree().argmin();
    const __int128 over = -primal.slack_tree().global_min();
    const std::vector<int>& x = primal.labels();
    groups.clear();
    for (int i = 0; i < m_.n; ++i)
      if (m_.plo[i] <= static_cast<int>(k) && static_cast<int>(k) < m_.phi[i] && stamp[c_.group_of[i]] != guard)
        stamp[c_.group_of[i]] = guard, groups.push_back(c_.group_of[i]);
    // Each group's best move (cost change per byte saved at k), then the best moves in
    // order until k fits: one scan of k's groups serves many moves (one move a scan took
    // seconds where a 3-D mesh's memory-bound model is far over).
    struct Move {
      long double ratio;
      int g, r;
    };
    std::vector<Move> moves;
    for (int g : groups) {
      const int cur = c_.label_of(g, x);
      if (cur < 0 || cm_.cost[cm_.off[g] + cur] >= kHugeCost) continue;
      Move best{0, -1, -1};
      for (int r = 0; r < cm_.num_strategies(g); ++r) {
        if (r == cur || cm_.cost[cm_.off[g] + r] >= kHugeCost) continue;
        const __int128 saved = saved_at(x, g, r, static_cast<int>(k));
        if (saved <= 0) continue;
        std::optional<__int128> d = group_delta(x, g, cur, r);
        if (!d) continue;
        long double ratio = static_cast<long double>(*d) / static_cast<long double>(std::min(saved, over));
        if (best.g < 0 || ratio < best.ratio) best = Move{ratio, g, r};
      }
      if (best.g >= 0) moves.push_back(best);
    }
    if (moves.empty()) return false;
    std::sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) {
      return a.ratio != b.ratio ? a.ratio < b.ratio : a.g < b.g;
    });
    for (const Move& mv : moves) {
      if (primal.slack_tree().value(k) >= 0) break;
      // an earlier move may have changed this group's members (shared nodes): still a saving?
      if (c_.label_of(mv.g, primal.labels()) < 0 || saved_at(primal.labels(), mv.g, mv.r, static_cast<int>(k)) <= 0)
        continue;
      move_group(primal, mv.g, mv.r, nullptr);
    }
  }
  return primal.memory_ok();
}

int ForestMoves::find(int x) {
  while (dsu_[x] != x) {
    dsu_[x] = dsu_[dsu_[x]];
    x = dsu_[x];
  }
  return x;
}

int ForestMoves::sweep(Primal& primal, std::mt19937_64& rng, const std::vector<double>* price, bool respect_memory) {
  const auto t_sweep = Clock::now();
  std::vector<int> remaining;
  for (int g = 0; g < cm_.n; ++g)
    if (cm_.num_strategies(g) > 1) remaining.push_back(g);
  std::shuffle(remaining.begin(), remaining.end(), rng);
  std::vector<int> forest, rest;
  std::vector<int> stamp(cm_.n, -1);
  int accepted = 0, forests = 0, mark = 0;
  while (!remaining.empty()) {
    forest.clear();
    rest.clear();
    for (int g : remaining) dsu_[g] = g;
    for (int g : remaining) {
      // g may join when its edges into the forest reach pairwise different trees.
      ++mark;
      bool ok = true;
      for (size_t k = cm_.adj_off[g]; k < cm_.adj_off[g + 1] && ok; ++k) {
        const auto& e = cm_.edges[cm_.adj[k]];
        int h = e.u == g ? e.v : e.u;
        if (in_forest_[h] < 0) continue;
        int r = find(h);
        if (stamp[r] == mark) ok = false;  // a second edge into the same tree: a cycle
        stamp[r] = mark;
      }
      if (!ok) {
        rest.push_back(g);
        continue;
      }
      in_forest_[g] = static_cast<int>(forest.size());
      forest.push_back(g);
      for (size_t k = cm_.adj_off[g]; k < cm_.adj_off[g + 1]; ++k) {
        const auto& e = cm_.edges[cm_.adj[k]];
        int h = e.u == g ? e.v : e.u;
        if (in_forest_[h] >= 0 && h != g) dsu_[find(h)] = g;
      }
    }
    for (int g : forest) in_forest_[g] = -1;
    accepted += optimise(primal, forest, price, respect_memory);
    remaining.swap(rest);
    ++forests;
  }
  if (trace_on()) {
    static int calls = 0;
    if (++calls % 50 == 1)
      trace("forest sweep: %d coarse nodes, %d forests, %d accepted, %.3fs", cm_.n, forests, accepted,
            std::chrono::duration<double>(Clock::now() - t_sweep).count());
  }
  return accepted;
}

bool ForestMoves::optimise(Primal& primal, const std::vector<int>& forest, const std::vector<double>* price,
                           bool respect_memory) {
  if (forest.empty()) return false;
  const std::vector<int> x = primal.labels();
  for (size_t k = 0; k < forest.size(); ++k) in_forest_[forest[k]] = static_cast<int>(k);
  auto fine_s = [&](size_t slot, int r) { return c_.fine_strategy(slot, r); };

  // Allowances: usage increase each member may take, never summing past the slack at any point.
  if (respect_memory && !m_.cap.empty()) {
    SlackTree work = primal.slack_tree();
    for (int g : forest)
      for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
        int i = c_.members[sl];
        allow_[i] = 0;
        if (m_.plo[i] >= m_.phi[i]) continue;
        Usage cur = m_.usage[m_.off[i] + x[i]], inc = 0;
        for (int r = 0; r < cm_.num_strategies(g); ++r) inc = std::max(inc, m_.usage[m_.off[i] + fine_s(sl, r)] - cur);
        if (inc <= 0) continue;
        __int128 room = work.min(m_.plo[i], m_.phi[i]);
        Usage a = static_cast<Usage>(std::max<__int128>(0, std::min<__int128>(room, inc)));
        if (a > 0) work.add(m_.plo[i], m_.phi[i], -static_cast<__int128>(a));
        allow_[i] = a;
      }
  }

  // Unary terms: the group's internal cost (+ price * usage) plus fine edges
  // to groups outside the forest; -1 in cur_ when no coarse strategy matches.
  belief_.resize(cm_.strat.size());
  cur_.assign(forest.size(), -1);
  for (size_t k = 0; k < forest.size(); ++k) {
    const int g = forest[k];
    const int sg = cm_.num_strategies(g);
    double* b = &belief_[cm_.off[g]];
    const size_t root_slot = c_.member_off[g];
    for (int r = 0; r < sg; ++r) {
      b[r] = static_cast<double>(cm_.cost[cm_.off[g] + r]);
      if (fine_s(root_slot, r) == x[c_.members[root_slot]]) cur_[k] = r;
    }
    for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
      const int i = c_.members[sl];
      const bool mem = respect_memory && !m_.cap.empty() && m_.plo[i] < m_.phi[i];
      const Usage cur = m_.usage[m_.off[i] + x[i]];
      const double pr = price && !price->empty() ? (*price)[i] : 0.0;
      if (mem || pr != 0.0)
        for (int r = 0; r < sg; ++r) {
          Usage u = m_.usage[m_.off[i] + fine_s(sl, r)];
          if (mem && u - cur > allow_[i]) b[r] = kInf;
          else b[r] += pr * static_cast<double>(u);
        }
      for (size_t a = m_.adj_off[i]; a < m_.adj_off[i + 1]; ++a) {
        const auto& e = m_.edges[m_.adj[a]];
        const int j = e.u == i ? e.v : e.u;
        if (in_forest_[c_.group_of[j]] >= 0) continue;  // inside g or along a forest edge
        const int sv = m_.num_strategies(e.v);
        for (int r = 0; r < sg; ++r) {
          if (b[r] == kInf) continue;
          const int s = fine_s(sl, r);
          Cost c = e.u == i ? m_.mat[e.off + static_cast<size_t>(s) * sv + x[j]]
                            : m_.mat[e.off + static_cast<size_t>(x[j]) * sv + s];
          b[r] = c == kInfiniteCost ? kInf : b[r] + static_cast<double>(c);
        }
      }
    }
  }

  // Trees: breadth-first order from each root over coarse edges inside the forest.
  order_.clear();
  for (int root : forest) {
    if (parent_[root] != -2) continue;
    parent_[root] = -1;
    size_t head = order_.size();
    order_.push_back(root);
    while (head < order_.size()) {
      int g = order_[head++];
      for (size_t a = cm_.adj_off[g]; a < cm_.adj_off[g + 1]; ++a) {
        const auto& e = cm_.edges[cm_.adj[a]];
        int h = e.u == g ? e.v : e.u;
        if (in_forest_[h] < 0 || parent_[h] != -2) continue;
        parent_[h] = g;
        parent_edge_[h] = cm_.adj[a];
        order_.push_back(h);
      }
    }
  }

  // Upward pass: children (later in the order) send min-marginals to their
  // parents: up[sp] = min over sc of bc[sc] + M(sp, sc), the matrix read row
  // by row whichever side the parent is on.
  up_off_.assign(forest.size(), 0);
  size_t up_size = 0;
  for (size_t k = 0; k < forest.size(); ++k) {
    int p = parent_[forest[k]];
    up_off_[k] = up_size;
    if (p >= 0) up_size += cm_.num_strategies(p);
  }
  up_.assign(up_size, kInf);
  auto matrix = [&](int c) {
    const auto& e = cm_.edges[parent_edge_[c]];
    return &matd_[e.off];
  };
  for (size_t idx = order_.size(); idx-- > 0;) {
    const int c = order_[idx], p = parent_[c];
    if (p < 0) continue;
    const auto& e = cm_.edges[parent_edge_[c]];
    const int sp_count = cm_.num_strategies(p), sc_count = cm_.num_strategies(c);
    const double* bc = &belief_[cm_.off[c]];
    double* bp = &belief_[cm_.off[p]];
    double* up = &up_[up_off_[in_forest_[c]]];
    const double* M = matrix(c);
    if (e.u == p) {
      for (int sp = 0; sp < sp_count; ++sp)
        if (bp[sp] != kInf) up[sp] = min_plus(M + static_cast<size_t>(sp) * sc_count, bc, sc_count);
    } else {
      for (int sc = 0; sc < sc_count; ++sc) {
        const double b = bc[sc];
        if (b == kInf) continue;
        const double* row = M + static_cast<size_t>(sc) * sp_count;
        for (int sp = 0; sp < sp_count; ++sp) up[sp] = std::min(up[sp], b + row[sp]);
      }
    }
    for (int sp = 0; sp < sp_count; ++sp) bp[sp] += up[sp];  // +inf when no child strategy fits
  }

  // Downward pass: roots take their best, children follow their parent's
  // choice: the first child strategy (the current one first, so ties keep
  // it) whose belief + edge cost equals the parent's message, the same sums
  // as the upward pass computed.
  std::vector<int> label(forest.size(), -1);
  for (int g : order_) {
    const int k = in_forest_[g], p = parent_[g];
    int s = -1;
    const double* b = &belief_[cm_.off[g]];
    if (p < 0) {
      double best = kInf;
      if (cur_[k] >= 0 && b[cur_[k]] < kInf) best = b[cur_[k]], s = cur_[k];
      for (int t = 0; t < cm_.num_strategies(g); ++t)
        if (b[t] < best) best = b[t], s = t;
    } else if (const int lp = label[in_forest_[p]]; lp >= 0) {
      const double want = up_[up_off_[k] + lp];
      const auto& e = cm_.edges[parent_edge_[g]];
      const int sc_count = cm_.num_strategies(g), sp_count = cm_.num_strategies(p);
      const double* M = matrix(g);
      auto entry = [&](int sc) {
        return e.u == p ? M[static_cast<size_t>(lp) * sc_count + sc] : M[static_cast<size_t>(sc) * sp_count + lp];
      };
      if (want < kInf) {
        const int cur = cur_[k];
        if (cur >= 0 && b[cur] + entry(cur) == want) s = cur;
        for (int sc = 0; sc < sc_count && s < 0; ++sc)
          if (b[sc] + entry(sc) == want) s = sc;
      }
    }
    label[k] = s;
  }

  // Apply to the members with exact accounting; keep only a strict improvement.
  __int128 total = 0;
  double priced = 0;  // price * usage change
  const bool has_price = price && !price->empty();
  std::vector<std::pair<int, int>> undo;
  for (size_t k = 0; k < forest.size(); ++k) {
    if (label[k] < 0) continue;  // no finite choice found: the group stays as it is
    const int g = forest[k];
    for (size_t sl = c_.member_off[g]; sl < c_.member_off[g + 1]; ++sl) {
      const int i = c_.members[sl];
      const int s = fine_s(sl, label[k]);
      if (s == x[i]) continue;
      total += primal.delta(i, s);
      if (has_price)  // exactly the price term the DP minimised above
        priced += (*price)[i] * static_cast<double>(m_.usage[m_.off[i] + s] - m_.usage[m_.off[i] + x[i]]);
      undo.emplace_back(i, x[i]);
      primal.move(i, s);
    }
  }
  for (int g : forest) in_forest_[g] = -1, parent_[g] = -2;
  if (undo.empty()) return false;
  // Priced moves are judged by the priced objective (true change first, so
  // a huge forbidden entry is never outweighed by a price).
  const bool better = has_price && total < Primal::kConflict / 2
                          ? static_cast<double>(total) + priced < 0
                          : total < 0;
  if (better && (!respect_memory || primal.memory_ok())) return true;
  for (auto it = undo.rbegin(); it != undo.rend(); ++it) primal.move(it->first, it->second);
  return false;
}

}  // namespace tlm::solver
