#include "core/solver/primal.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "core/solver/trace.h"

namespace tlm::solver {

Primal::Primal(const Model& m) : m_(m), x_(m.n, 0) {}

__int128 Primal::entry(int e, int su, int sv) const {
  const auto& ed = m_.edges[e];
  Cost c = m_.mat[ed.off + static_cast<size_t>(su) * m_.num_strategies(ed.v) + sv];
  return c == kInfiniteCost ? kConflict : static_cast<__int128>(c);
}

void Primal::set(const std::vector<int>& labels) {
  x_ = labels;
  std::vector<__int128> s(m_.cap.size());
  std::vector<__int128> diff(m_.cap.size() + 1, 0);
  for (int i = 0; i < m_.n; ++i) {
    Usage u = m_.usage[m_.off[i] + x_[i]];
    if (u == 0 || m_.plo[i] >= m_.phi[i]) continue;
    diff[m_.plo[i]] += u;
    diff[m_.phi[i]] -= u;
  }
  __int128 load = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    load += diff[k];
    s[k] = static_cast<__int128>(m_.cap[k]) - load;
  }
  slack_.build(s);
}

__int128 Primal::cost() const {
  __int128 total = 0;
  for (int i = 0; i < m_.n; ++i) total += m_.cost[m_.off[i] + x_[i]];
  for (size_t e = 0; e < m_.edges.size(); ++e) total += entry(static_cast<int>(e), x_[m_.edges[e].u], x_[m_.edges[e].v]);
  return total;
}

int Primal::conflicts() const {
  int c = 0;
  for (size_t e = 0; e < m_.edges.size(); ++e) c += entry(static_cast<int>(e), x_[m_.edges[e].u], x_[m_.edges[e].v]) == kConflict;
  return c;
}

__int128 Primal::delta(int i, int s) const {
  const int cur = x_[i];
  __int128 d = static_cast<__int128>(m_.cost[m_.off[i] + s]) - m_.cost[m_.off[i] + cur];
  for (size_t k = m_.adj_off[i]; k < m_.adj_off[i + 1]; ++k) {
    int e = m_.adj[k];
    const auto& ed = m_.edges[e];
    if (ed.u == i)
      d += entry(e, s, x_[ed.v]) - entry(e, cur, x_[ed.v]);
    else
      d += entry(e, x_[ed.u], s) - entry(e, x_[ed.u], cur);
  }
  return d;
}

std::vector<int> Primal::tightest_points(size_t count) const {
  std::vector<__int128> v = slack_.values();
  std::vector<int> idx(v.size());
  for (size_t k = 0; k < v.size(); ++k) idx[k] = static_cast<int>(k);
  count = std::min(count, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + count, idx.end(), [&](int a, int b) { return v[a] != v[b] ? v[a] < v[b] : a < b; });
  idx.resize(count);
  return idx;
}

void Primal::move(int i, int s) {
  Usage du = m_.usage[m_.off[i] + s] - m_.usage[m_.off[i] + x_[i]];
  if (du != 0 && m_.plo[i] < m_.phi[i]) slack_.add(m_.plo[i], m_.phi[i], -static_cast<__int128>(du));
  x_[i] = s;
}

bool Primal::chain_move(int i, int s, std::vector<std::pair<int, int>>& undo, __int128& change, size_t max_nodes) {
  undo.clear();
  change = delta(i, s);
  undo.emplace_back(i, x_[i]);
  move(i, s);
  auto moved = [&](int j) {
    return std::any_of(undo.begin(), undo.end(), [&](const std::pair<int, int>& mv) { return mv.first == j; });
  };
  // Forbidden entries node j would have in strategy t beside nodes already moved: the chain
  // may not undo its own steps. Entries beside the others are the chain's next steps.
  auto against_moved = [&](int j, int t) {
    int c = 0;
    for (size_t k = m_.adj_off[j]; k < m_.adj_off[j + 1]; ++k) {
      const auto& ed = m_.edges[m_.adj[k]];
      const int o = ed.u == j ? ed.v : ed.u;
      if (moved(o) && (ed.u == j ? entry(m_.adj[k], t, x_[o]) : entry(m_.adj[k], x_[o], t)) == kConflict) ++c;
    }
    return c;
  };
  std::deque<int> queue{i};
  while (!queue.empty()) {
    const int u = queue.front();
    queue.pop_front();
    for (size_t k = m_.adj_off[u]; k < m_.adj_off[u + 1]; ++k) {
      const auto& ed = m_.edges[m_.adj[k]];
      const int j = ed.u == u ? ed.v : ed.u;
      if (entry(m_.adj[k], x_[ed.u], x_[ed.v]) != kConflict) continue;
      if (moved(j) || undo.size() >= max_nodes) return false;  // a cycle, or too long a chain
      int best = -1;
      __int128 best_d = 0;
      for (int t = 0; t < m_.num_strategies(j); ++t) {
        if (t == x_[j] || against_moved(j, t) > 0) continue;
        const __int128 d = delta(j, t);
        if (best < 0 || d < best_d) best = t, best_d = d;
      }
      if (best < 0) return false;  // j has no strategy beside the moved nodes
      change += best_d;
      undo.emplace_back(j, x_[j]);
      move(j, best);
      queue.push_back(j);
    }
  }
  return true;
}

void Primal::undo(const std::vector<std::pair<int, int>>& moves) {
  for (auto it = moves.rbegin(); it != moves.rend(); ++it) move(it->first, it->second);
}

bool Primal::repair(Clock::time_point deadline) {
  if (memory_ok()) return true;
  struct Cand {
    long double ratio;
    int i, s;
    bool chain;  // moves its coupled neighbours too (chain_move)
  };
  struct Forbidden {
    __int128 d;  // the lone move's cost change
    int i, s;
    size_t cand;  // node i's entry in cands
  };
  constexpr size_t kChains = 2, kChainTries = 128;
  std::vector<Cand> cands;
  std::vector<Forbidden> forbidden, of_node;
  std::vector<std::pair<int, int>> moved;
  for (int guard = 0; guard < 4 * m_.n + 16 && !memory_ok() && Clock::now() < deadline; ++guard) {
    size_t k = slack_.argmin();
    __int128 over = -slack_.global_min();
    cands.clear();
    forbidden.clear();
    __int128 free_savings = 0;  // by the best move of each node that is clear of forbidden entries
    for (int i = 0; i < m_.n; ++i) {
      if (m_.plo[i] > static_cast<int>(k) || static_cast<int>(k) >= m_.phi[i]) continue;
      Usage cur = m_.usage[m_.off[i] + x_[i]];
      if (cur == 0) continue;
      Cand best{0, i, -1, false};
      __int128 best_d = 0;  // best's cost change
      of_node.clear();
      for (int s = 0; s < m_.num_strategies(i); ++s) {
        Usage u = m_.usage[m_.off[i] + s];
        if (u >= cur) continue;
        const __int128 d = delta(i, s);
        if (d >= kConflict / 2) of_node.push_back({d, i, s, cands.size()});  // a lone move of last resort, or a chain
        long double r = static_cast<long double>(d) / static_cast<long double>(std::min<__int128>(cur - u, over));
        if (best.s < 0 || r < best.ratio) best = Cand{r, i, s, false}, best_d = d;
      }
      if (best.s < 0) continue;
      if (best_d < kConflict / 2) free_savings += cur - m_.usage[m_.off[i] + best.s];
      // A chain costs a pass over each node it moves: only the kChains cheapest lone moves.
      const size_t tries = std::min(of_node.size(), kChains);
      std::partial_sort(of_node.begin(), of_node.begin() + static_cast<std::ptrdiff_t>(tries), of_node.end(),
                        [](const Forbidden& a, const Forbidden& b) { return a.d != b.d ? a.d < b.d : a.s < b.s; });
      forbidden.insert(forbidden.end(), of_node.begin(), of_node.begin() + static_cast<std::ptrdiff_t>(tries));
      cands.push_back(best);  // at index cands.size() - 1, as of_node's entries say
    }
    if (cands.empty()) return false;
    // Moves clear of forbidden entries come first; where they cannot make point k fit, a
    // move that is forbidden beside a neighbour is tried with its neighbours moved too.
    if (free_savings < over) {
      // A chain costs up to a pass over 64 nodes: at a point thousands of nodes cover, the
      // kChainTries whose lone moves break the fewest entries at the least cost.
      if (forbidden.size() > kChainTries) {
        std::partial_sort(forbidden.begin(), forbidden.begin() + static_cast<std::ptrdiff_t>(kChainTries),
                          forbidden.end(), [](const Forbidden& a, const Forbidden& b) {
                            return a.d != b.d ? a.d < b.d : a.i != b.i ? a.i < b.i : a.s < b.s;
                          });
        forbidden.resize(kChainTries);
      }
      for (const Forbidden& f : forbidden) {
        if (Clock::now() >= deadline) break;
        const __int128 before = slack_.value(k);
        __int128 change = 0;
        const bool ok = chain_move(f.i, f.s, moved, change);
        const __int128 gained = slack_.value(k) - before;
        undo(moved);
        if (!ok || gained <= 0) continue;
        const long double r = static_cast<long double>(change) / static_cast<long double>(std::min(gained, over));
        if (r < cands[f.cand].ratio) cands[f.cand] = Cand{r, f.i, f.s, true};
      }
    }
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
      return a.ratio != b.ratio ? a.ratio < b.ratio : a.i < b.i;
    });
    // Apply the cheapest moves until point k fits (deltas re-read: earlier moves may touch neighbours).
    for (const Cand& c : cands) {
      if (slack_.value(k) >= 0) break;
      if (m_.usage[m_.off[c.i] + c.s] >= m_.usage[m_.off[c.i] + x_[c.i]]) continue;
      if (!c.chain) {
        move(c.i, c.s);
        continue;
      }
      const __int128 before = slack_.value(k);
      __int128 change = 0;
      if (!chain_move(c.i, c.s, moved, change) || slack_.value(k) <= before) undo(moved);
    }
  }
  return memory_ok();
}

bool Primal::clear_conflicts(Clock::time_point deadline) {
  constexpr size_t kChains = 4;
  struct Start {
    __int128 d;
    int u, t;
  };
  std::vector<Start> starts;
  std::vector<std::pair<int, int>> moved;
  for (int round = 0; round < 3 && conflicts() > 0; ++round) {
    int tried = 0, none_ok = 0, fit = 0, over = 0, too_long = 0;
    for (size_t e = 0; e < m_.edges.size(); ++e) {
      const auto& ed = m_.edges[e];
      if (entry(static_cast<int>(e), x_[ed.u], x_[ed.v]) != kConflict) continue;  // or cleared by an earlier chain
      // Best: a chain that leaves every point at least the least slack before, cheapest;
      // else the chain that leaves the most (the memory repair below then takes over).
      const __int128 floor = std::min<__int128>(0, slack_.size() ? slack_.global_min() : 0);
      int best_node = -1, best_s = -1;
      __int128 best_change = 0, best_slack = 0;
      bool best_fits = false;
      // The chains tried: per node, the kChains strategies that clear this entry at the
      // least cost of the lone move (a chain costs a pass over each node it moves; 3-D
      // meshes give ~90 strategies a node).
      starts.clear();
      for (int u : {ed.u, ed.v}) {
        const size_t first = starts.size();
        for (int t = 0; t < m_.num_strategies(u); ++t)
          if (t != x_[u] && (u == ed.u ? entry(static_cast<int>(e), t, x_[ed.v])
                                       : entry(static_cast<int>(e), x_[ed.u], t)) != kConflict)
            starts.push_back({delta(u, t), u, t});
        const size_t keep = std::min(starts.size() - first, kChains);
        std::partial_sort(starts.begin() + static_cast<std::ptrdiff_t>(first),
                          starts.begin() + static_cast<std::ptrdiff_t>(first + keep), starts.end(),
                          [](const Start& a, const Start& b) { return a.d != b.d ? a.d < b.d : a.t < b.t; });
        starts.resize(first + keep);
      }
      for (const Start& st : starts) {
        if (Clock::now() >= deadline) return conflicts() == 0;
        __int128 change = 0;
        const bool ok = chain_move(st.u, st.t, moved, change);
        const __int128 least = slack_.size() ? slack_.global_min() : 0;
        if (!ok && moved.size() >= kChainNodes) ++too_long;
        undo(moved);
        if (!ok) continue;
        const bool fits = least >= floor;
        const bool better = best_node < 0 || (fits != best_fits ? fits
                                              : fits           ? change < best_change
                                                               : least > best_slack);
        if (better) best_node = st.u, best_s = st.t, best_change = change, best_slack = least, best_fits = fits;
      }
      __int128 change = 0;
      ++tried;
      if (best_node < 0) ++none_ok;
      else ++(best_fits ? fit : over);
      if (best_node >= 0) chain_move(best_node, best_s, moved, change);
    }
    trace("clear conflicts: round %d: %d entries, %d without a chain (%d starts too long), %d chains keep memory, "
          "%d do not", round, tried, none_ok, too_long, fit, over);
    if (!memory_ok()) repair(deadline);
  }
  return conflicts() == 0;
}

void Primal::improve(size_t max_moves) {
  std::deque<int> queue;
  std::vector<char> queued(m_.n, 1);
  for (int i = 0; i < m_.n; ++i) queue.push_back(i);
  size_t moves = 0;
  while (!queue.empty() && moves < max_moves) {
    int i = queue.front();
    queue.pop_front();
    queued[i] = 0;
    const int cur = x_[i];
    const Usage cur_u = m_.usage[m_.off[i] + cur];
    bool have_room = false;  // slack over i's points, read only when a move needs memory
    __int128 room = 0;
    int best = -1;
    __int128 best_d = 0;
    for (int s = 0; s < m_.num_strategies(i); ++s) {
      if (s == cur) continue;
      Usage du = m_.usage[m_.off[i] + s] - cur_u;
      if (du > 0) {
        if (!have_room) {
          room = m_.plo[i] < m_.phi[i] ? slack_.min(m_.plo[i], m_.phi[i]) : SlackTree::kBig;
          have_room = true;
        }
        if (du > room) continue;
      }
      __int128 d = delta(i, s);
      if (d < best_d) best_d = d, best = s;
    }
    if (best < 0) continue;
    move(i, best);
    ++moves;
    for (size_t k = m_.adj_off[i]; k < m_.adj_off[i + 1]; ++k) {
      const auto& ed = m_.edges[m_.adj[k]];
      int j = ed.u == i ? ed.v : ed.u;
      if (!queued[j]) queued[j] = 1, queue.push_back(j);
    }
  }
}

}  // namespace tlm::solver
