#include "core/solver/primal.h"

#include <algorithm>
#include <cmath>
#include <deque>

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

bool Primal::repair() {
  if (memory_ok()) return true;
  struct Cand {
    long double ratio;
    int i, s;
  };
  std::vector<Cand> cands;
  for (int guard = 0; guard < 4 * m_.n + 16 && !memory_ok(); ++guard) {
    size_t k = slack_.argmin();
    __int128 over = -slack_.global_min();
    cands.clear();
    for (int i = 0; i < m_.n; ++i) {
      if (m_.plo[i] > static_cast<int>(k) || static_cast<int>(k) >= m_.phi[i]) continue;
      Usage cur = m_.usage[m_.off[i] + x_[i]];
      if (cur == 0) continue;
      int best_s = -1;
      long double best_r = 0;
      for (int s = 0; s < m_.num_strategies(i); ++s) {
        Usage u = m_.usage[m_.off[i] + s];
        if (u >= cur) continue;
        __int128 saved = std::min<__int128>(cur - u, over);
        long double r = static_cast<long double>(delta(i, s)) / static_cast<long double>(saved);
        if (best_s < 0 || r < best_r) best_s = s, best_r = r;
      }
      if (best_s >= 0) cands.push_back({best_r, i, best_s});
    }
    if (cands.empty()) return false;
    std::sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
      return a.ratio != b.ratio ? a.ratio < b.ratio : a.i < b.i;
    });
    // Apply the cheapest moves until point k fits (deltas re-read: earlier moves may touch neighbours).
    for (const Cand& c : cands) {
      if (slack_.value(k) >= 0) break;
      if (m_.usage[m_.off[c.i] + c.s] >= m_.usage[m_.off[c.i] + x_[c.i]]) continue;
      move(c.i, c.s);
    }
  }
  return memory_ok();
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
