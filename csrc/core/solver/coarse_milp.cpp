#include "core/solver/coarse_milp.h"

#include <algorithm>
#include <cmath>

#include "core/solver/highs_api.h"
#include "core/solver/primal.h"
#include "core/solver/trace.h"

namespace tlm::solver {
namespace {

// Up to `count` points with negative (or, with `tight`, smallest) slack,
// most violated first, at least `spread` points apart so rows differ.
std::vector<int> pick_points(const std::vector<__int128>& slack, size_t count, bool tight, int spread) {
  std::vector<int> idx;
  for (size_t k = 0; k < slack.size(); ++k)
    if (tight || slack[k] < 0) idx.push_back(static_cast<int>(k));
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return slack[a] != slack[b] ? slack[a] < slack[b] : a < b; });
  std::vector<int> out;
  for (int k : idx) {
    if (out.size() >= count) break;
    bool near = false;
    for (int o : out) near |= std::abs(o - k) < spread;
    if (!near) out.push_back(k);
  }
  return out;
}

}  // namespace

CoarseMilpResult coarse_milp_search(const Model& m, const Coarsening& c, std::vector<int>& best, __int128& best_cost,
                                    Clock::time_point deadline, int threads, uint64_t seed,
                                    const std::function<void(const std::vector<int>&, __int128)>& offer,
                                    const std::function<bool()>& stop, size_t initial_rows) {
  CoarseMilpResult res;
  if (!highs_api()) return res;
  const Model& cm = c.coarse;
  auto to_coarse = [&](const std::vector<int>& x) {
    std::vector<int> y(cm.n);
    for (int g = 0; g < cm.n; ++g) y[g] = c.label_of(g, x);
    return y;
  };
  auto to_fine = [&](const std::vector<int>& y) {
    std::vector<int> x(m.n);
    for (int g = 0; g < cm.n; ++g)
      for (size_t sl = c.member_off[g]; sl < c.member_off[g + 1]; ++sl) x[c.members[sl]] = c.fine_strategy(sl, y[g]);
    return x;
  };
  std::vector<double> acc(cm.strat.size(), 0.0);
  auto row_at = [&](int k) {
    MemoryRow row;
    row.cap = static_cast<double>(m.cap[k]);
    std::vector<size_t> touched;
    for (int i = 0; i < m.n; ++i) {
      if (m.plo[i] > k || k >= m.phi[i]) continue;
      const int g = c.group_of[i];
      const size_t sl = c.slot_of[i];
      for (int r = 0; r < cm.num_strategies(g); ++r) {
        Usage u = m.usage[m.off[i] + c.fine_strategy(sl, r)];
        if (u == 0) continue;
        size_t q = cm.off[g] + r;
        if (acc[q] == 0.0) touched.push_back(q);
        acc[q] += static_cast<double>(u);
      }
    }
    std::sort(touched.begin(), touched.end());
    for (size_t q : touched) row.terms.emplace_back(q, acc[q]), acc[q] = 0.0;
    return row;
  };

  Primal check(m);
  check.set(best);
  std::vector<MemoryRow> rows;
  std::vector<char> have(m.cap.size(), 0);
  for (int k : pick_points(check.slack_tree().values(), initial_rows, true, 8)) rows.push_back(row_at(k)), have[k] = 1;
  std::vector<int> start = to_coarse(best);
  if (std::find(start.begin(), start.end(), -1) != start.end()) {
    trace("coarse milp: best labelling is not representable; skipped");
    return res;
  }
  res.ran = true;
  bool added_rows = true;
  while (!stop() && Clock::now() < deadline) {
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left < 0.2) break;
    MilpOptions mo;
    // Rounds are short while violated rows come in; once a round added
    // none, HiGHS gets the rest of the time.
    mo.time_limit_s = added_rows ? std::min(left, std::max(2.0, 0.25 * left)) : left;
    mo.threads = threads;
    mo.seed = seed + res.rounds;
    mo.start = &start;
    mo.rows = &rows;
    mo.has_cutoff = true;
    mo.cutoff = static_cast<double>(best_cost) * (1 + 1e-9) + 1;
    MilpResult mr = solve_milp(cm, mo);
    ++res.rounds;
    if (!mr.ran) {
      trace("coarse milp: %s", mr.why.c_str());
      break;
    }
    if (std::isfinite(mr.dual_bound))
      res.bound = std::max<long double>(res.bound, static_cast<long double>(mr.dual_bound) -
                                                        1e-7L * std::fabs(static_cast<long double>(mr.dual_bound)) - 1);
    if (mr.labels.empty()) {
      // No solution under the cutoff with these rows: the best is optimal.
      res.optimal = mr.optimal || mr.infeasible;
      trace("coarse milp round %d: no better solution (optimal=%d)", res.rounds, (int)res.optimal);
      break;
    }
    std::vector<int> x = to_fine(mr.labels);
    check.set(x);
    std::vector<int> viol = pick_points(check.slack_tree().values(), 30, false, 4);
    __int128 cost = check.cost();
    if (trace_on()) {
      __int128 cc = 0;
      for (int g = 0; g < cm.n; ++g) cc += cm.cost[cm.off[g] + mr.labels[g]];
      for (const auto& e : cm.edges)
        cc += cm.mat[e.off + static_cast<size_t>(mr.labels[e.u]) * cm.num_strategies(e.v) + mr.labels[e.v]];
      trace("coarse objective %s, fine %s, highs improvements %zu, last %.6e", to_string(cc).c_str(), to_string(cost).c_str(),
            mr.improvements.size(), mr.improvements.empty() ? 0.0 : mr.improvements.back().second);
    }
    trace("coarse milp round %d: %zu rows, cost %s, %zu violated points added, optimal=%d, bound %.6Le, %.1fs", res.rounds,
          rows.size(), to_string(cost).c_str(), viol.size(), (int)mr.optimal, res.bound, mr.seconds);
    if (cost >= best_cost) {
      // Proven optimal for the relaxation and no cheaper: the best is optimal.
      if (mr.optimal) {
        res.optimal = true;
        break;
      }
      // Not better than what we have (e.g. HiGHS stopped before any incumbent
      // of its own): nothing to learn from it; go on with a longer round.
      added_rows = false;
      continue;
    }
    if (viol.empty() && check.conflicts() == 0) {
      if (cost < best_cost) {
        best = x;
        best_cost = cost;
        offer(best, best_cost);
        start = mr.labels;
      }
      if (mr.optimal) {
        res.optimal = true;
        break;
      }
      added_rows = false;
      continue;  // time limit inside HiGHS: go on from the new start
    }
    added_rows = true;
    for (int k : viol)
      if (!have[k]) rows.push_back(row_at(k)), have[k] = 1;
  }
  res.rows = rows.size();
  return res;
}

}  // namespace tlm::solver
