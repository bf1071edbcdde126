#include "core/solver/block_bound.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <thread>

#include "core/solver/block_pieces.h"
#include "core/solver/dual.h"
#include "core/solver/search.h"
#include "core/solver/sweep_labels.h"
#include "core/solver/trace.h"

namespace tlm::solver {
namespace {

// A distinct piece's message passing state.
struct PieceState {
  std::unique_ptr<DualSolver> dual;
  std::vector<double> node_lam;  // per model node: the memory multipliers it carries now
  std::vector<double> applied;   // per model strategy: the agreement multipliers it carries now
  std::vector<int> labels;
  std::vector<double> delta, change, priced;  // scratch of its pass
  long double bound = 0, magnitude = 0;  // its last bound (once for every copy of it)
};

// The distinct pieces dealt to `threads` workers, largest first to the least loaded (by
// the entries a pass reads). Empty shares are dropped.
std::vector<std::vector<size_t>> deal_pieces(const std::vector<PieceModel>& distinct, int threads) {
  std::vector<size_t> order(distinct.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  const auto work = [&](size_t k) { return distinct[k].model.mat.size() + distinct[k].model.cost.size(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return work(a) > work(b); });
  std::vector<std::vector<size_t>> share(static_cast<size_t>(std::max(1, threads)));
  std::vector<size_t> load(share.size(), 0);
  for (size_t k : order) {
    const size_t t = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    share[t].push_back(k), load[t] += work(k);
  }
  share.erase(std::remove_if(share.begin(), share.end(), [](const auto& v) { return v.empty(); }), share.end());
  return share;
}

// fn(k) for every piece of every share, one thread a share (the first on this one); the
// first exception is rethrown once all have joined.
template <typename Fn>
void for_each_piece(const std::vector<std::vector<size_t>>& share, const Fn& fn) {
  std::vector<std::exception_ptr> failed(share.size());
  const auto run = [&](size_t t) {
    try {
      for (size_t k : share[t]) fn(k);
    } catch (...) {
      failed[t] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < share.size(); ++t) workers.emplace_back(run, t);
  run(0);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

// Moves each agreement multiplier mu[key][s] so that, after this iteration's passes, the
// copies and their sources would carry equal reduced costs for strategy s: the copies' mean
// reduced cost against the sources' per copy they serve (a source carries -mu once per
// copy), half the difference each way. This is the block-coordinate step of dual
// decomposition (each piece's reduced costs after a pass approximate its min-marginals):
// a copy priced above what its source's choice costs pulls the two towards agreement at
// once, where subgradient steps on the decoded labels move a few multipliers a little per
// iteration. On a 70B problem's pieces (10 s limit) the bound after 27 iterations rose from
// 10.37e12 to 10.47-10.54e12 (the plan: 10.74e12). Any multipliers give a valid bound.
void balance_agreements(const std::vector<PieceModel>& distinct, const std::vector<PieceState>& state,
                        std::vector<std::vector<double>>& mu) {
  std::vector<std::vector<double>> src(mu.size()), src_weight(mu.size()), copy(mu.size()), copy_weight(mu.size());
  for (size_t k = 0; k < mu.size(); ++k) {
    src[k].assign(mu[k].size(), 0.0);
    src_weight[k] = copy[k] = copy_weight[k] = src[k];
  }
  for (size_t k = 0; k < distinct.size(); ++k) {
    const PieceModel& d = distinct[k];
    const Model& m = d.model;
    const std::vector<double> reduced_costs = state[k].dual->reduced_costs();
    for (size_t i = 0; i < d.terms.size(); ++i) {
      if (d.terms[i].empty()) continue;
      for (size_t j = m.off[i]; j < m.off[i + 1]; ++j) {
        const double reduced = reduced_costs[j];
        if (!std::isfinite(reduced)) continue;  // forbidden here: nothing to balance against
        const size_t s = static_cast<size_t>(m.strat[j]);
        for (const auto& [key, coefficient] : d.terms[i]) {
          const size_t key_index = static_cast<size_t>(key);
          if (coefficient < 0) {  // a source, serving -coefficient copies
            src[key_index][s] += d.count * reduced;
            src_weight[key_index][s] += d.count * static_cast<double>(-coefficient);
          } else {
            copy[key_index][s] += d.count * reduced;
            copy_weight[key_index][s] += d.count * static_cast<double>(coefficient);
          }
        }
      }
    }
  }
  for (size_t k = 0; k < mu.size(); ++k)
    for (size_t s = 0; s < mu[k].size(); ++s)
      if (src_weight[k][s] > 0 && copy_weight[k][s] > 0)
        mu[k][s] += 0.5 * (src[k][s] / src_weight[k][s] - copy[k][s] / copy_weight[k][s]);
}

// The agreement multipliers' subgradient at the decoded labels: per key and strategy s,
// the copies labelled s less the copies their sources' labels s serve (a term's
// coefficient is positive on a copy and minus the copies served on a source), counted once
// per piece of a distinct piece. Zero where every copy agrees with its source. Returns its
// squared norm.
double agreement_subgradient(const std::vector<PieceModel>& distinct, const std::vector<PieceState>& state,
                             std::vector<std::vector<double>>& g) {
  for (std::vector<double>& v : g) std::fill(v.begin(), v.end(), 0.0);
  for (size_t k = 0; k < distinct.size(); ++k) {
    const PieceModel& d = distinct[k];
    for (size_t i = 0; i < d.terms.size(); ++i) {
      if (d.terms[i].empty()) continue;
      const size_t s = static_cast<size_t>(d.model.strat[d.model.off[i] + static_cast<size_t>(state[k].labels[i])]);
      for (const auto& [key, coefficient] : d.terms[i]) g[static_cast<size_t>(key)][s] += d.count * coefficient;
    }
  }
  double norm2 = 0;
  for (const std::vector<double>& v : g)
    for (double x : v) norm2 += x * x;
  return norm2;
}

}  // namespace

// How often the agreement multipliers are balanced, in passes (see the loop).
constexpr int kBalanceEvery = 4;
// The agreement multipliers' Polyak step, as a fraction of the gap to the upper bound
// (see the loop).
constexpr double kAgreementStep = 0.1;

BlockBound block_bound(const Problem& p, const std::vector<std::vector<int>>& blocks,
                       const std::vector<char>& keep_step, const std::vector<int>& step_block,
                       const std::vector<std::pair<int64_t, double>>& start_prices, __int128 upper,
                       Clock::time_point deadline, int max_iterations, int threads, double level_off,
                       const std::function<bool(long double)>& on_bound) {
  BlockBound out;
  const BlockPieces bp = split_into_pieces(p, blocks, keep_step, step_block);
  out.pieces = bp.pieces;
  out.distinct = static_cast<int>(bp.distinct.size());
  if (!bp.infeasible.empty()) {
    out.note = bp.infeasible;
    return out;
  }
  const std::vector<PieceModel>& distinct = bp.distinct;
  const size_t kept_points = bp.kept_points, own_points = bp.own_points, all_points = bp.rhs.size();
  const std::vector<long double>& rhs = bp.rhs;
  const std::vector<int>& key_width = bp.key_width;
  // The pieces' passes and bounds are independent within an iteration: they run on the
  // solver's threads (the fold's search is over by now, so its cores are free), as does
  // factoring each piece's edge costs.
  const std::vector<std::vector<size_t>> share = deal_pieces(distinct, threads);
  std::vector<PieceState> state(distinct.size());
  for_each_piece(share, [&](size_t k) {
    const Model& m = distinct[k].model;
    state[k].dual = std::make_unique<DualSolver>(m, DualSolver::edge_costs(m));
    state[k].node_lam.assign(static_cast<size_t>(m.n), 0.0);
    state[k].applied.assign(m.cost.size(), 0.0);
  });
  if (trace_on()) {
    size_t strategies = 0, entries = 0;
    for (const PieceModel& d : distinct) strategies += d.model.cost.size(), entries += d.model.mat.size();
    trace("block bound: %d pieces, %d distinct (%zu strategies, %zu matrix entries), %zu copies, %zu agreement keys",
          out.pieces, out.distinct, strategies, entries, bp.copies, key_width.size());
  }

  // Multipliers per priced row (kept steps, then own-step rows), from the caller's where given.
  std::vector<double> lam(all_points, 0.0);
  for (const auto& [step, price] : start_prices) {
    const int64_t k = bp.kept_row(step);
    if (k >= 0 && price > 0) lam[static_cast<size_t>(k)] = price;
  }
  // Steps are scaled by the mean priced span, as the full bound search's (search.cpp).
  double span = 0, spanned = 0;
  for (const PieceModel& d : distinct)
    for (size_t i = 0; i < d.lo.size(); ++i) {
      if (d.lo[i] < d.hi[i]) span += d.count * (d.hi[i] - d.lo[i]), spanned += d.count;
      if (d.own_lo[i] < d.own_hi[i]) span += d.count * (d.own_hi[i] - d.own_lo[i]), spanned += d.count;
    }
  span = spanned > 0 ? std::max(1.0, span / spanned) : 1.0;
  // Agreement multipliers per key and strategy of its source, from zero (a copy is then
  // free: each edge across pieces at its least entry given the reading node's strategy).
  // They move by balancing reduced costs (balance_agreements) and by a subgradient step.
  std::vector<std::vector<double>> mu(key_width.size());
  for (size_t k = 0; k < key_width.size(); ++k) mu[k].assign(static_cast<size_t>(key_width[k]), 0.0);
  std::vector<std::vector<double>> agreement_g = mu;  // scratch of agreement_subgradient
  // The step scale starts small: the folded solve's multipliers are a good start, and a
  // first step at search.cpp's 0.5 threw them away. On one 70B problem, the bound after 8
  // and 30 iterations: 9.06e12 / 9.97e12 from 0.5, 9.20 / 10.04 from 0.1, 9.39 / 10.10 from
  // 0.02 (the plan: 10.74e12). From such a start it also stays small. The bound's first
  // tens of iterations rise because the messages converge, not because of the steps, and a
  // scale grown on that rise (x1.3 an iteration, as search.cpp's, to 8-19 here) walked the
  // multipliers away from the start: on 405B (16x8x8, limit 30) the bound ended at
  // 17.19e12 growing and 18.13-18.14e12 held or frozen (plan ~19.9e12); on 70B at limit
  // 10, 10.26-10.53e12 growing (5 runs) and 10.46-10.56e12 held or frozen (9 runs), the
  // level set mostly by the fold's multipliers. Without a start (nothing to keep) it grows
  // while the bound rises.
  bool started = false;
  for (double v : lam) started = started || v > 0;
  double scale = 0.02, prev = -1e300;
  bool fell = false;
  std::vector<double> prefix(all_points + 1, 0.0), load(all_points + 1, 0.0);
  std::vector<long double> best_by_iteration;  // out.bound after each iteration, for level_off
  bool stop = false;
  for (int it = 0; it < max_iterations && !stop && (it == 0 || Clock::now() < deadline); ++it) {
    for (size_t k = 0; k < all_points; ++k) prefix[k + 1] = prefix[k] + lam[k];
    long double raw = 0, magnitude = 0;
    for_each_piece(share, [&](size_t k) {
      const PieceModel& d = distinct[k];
      PieceState& st = state[k];
      const Model& m = d.model;
      std::vector<double>& delta = st.delta;
      std::vector<double>& change = st.change;
      delta.assign(d.lo.size(), 0.0);
      for (size_t i = 0; i < d.lo.size(); ++i) {
        if (d.lo[i] >= d.hi[i] && d.own_lo[i] >= d.own_hi[i]) continue;
        const double v = prefix[static_cast<size_t>(d.hi[i])] - prefix[static_cast<size_t>(d.lo[i])] +
                         prefix[static_cast<size_t>(d.own_hi[i])] - prefix[static_cast<size_t>(d.own_lo[i])];
        delta[i] = v - st.node_lam[i];
        st.node_lam[i] = v;
      }
      st.dual->add_penalty(delta);
      change.assign(m.cost.size(), 0.0);
      bool moved = false;
      for (size_t i = 0; i < d.terms.size(); ++i) {
        if (d.terms[i].empty()) continue;  // carries no agreement multiplier: nothing to move
        for (size_t j = m.off[i]; j < m.off[i + 1]; ++j) {
          double want = 0;
          for (const auto& [key, coefficient] : d.terms[i])
            want += coefficient * mu[static_cast<size_t>(key)][static_cast<size_t>(m.strat[j])];
          change[j] = want - st.applied[j];
          st.applied[j] = want;
          moved = moved || change[j] != 0;
        }
      }
      if (moved) st.dual->add_potentials(change);
      st.dual->forward(st.labels);
      st.dual->backward();
      // The memory subgradient reads its loads from these labels: mended where the decode hit
      // dead ends (sweep_labels.h), at the piece's priced costs. A sweep costs about a third
      // more an iteration; it pays where iterations are few. 70B (8x8x4), bound after 27
      // iterations: 10.09e12 -> 10.50e12; at a 10 s limit, 23-66 iterations, 10.10-10.49e12
      // without and 10.44-10.50e12 with (the level both reach, 10.51e12, comes sooner); two
      // sweeps 10.46e12; only the nodes on forbidden pairs 10.43-10.49e12. 405B at 30 s:
      // 16.72e12 -> 17.00e12.
      st.priced.resize(m.cost.size());
      for (int i = 0; i < m.n; ++i)
        for (size_t j = m.off[i]; j < m.off[i + 1]; ++j)
          st.priced[j] = static_cast<double>(m.cost[j]) + st.node_lam[i] * static_cast<double>(m.usage[j]) + st.applied[j];
      sweep_labels(m, st.priced, st.labels);
    });
    // The exact bound reads every edge once more, a third of an iteration: it is taken every
    // fourth iteration and on the last, the quick one (node minima: edges are left at 0 by
    // the pass, up to rounding) steering the steps in between, as the full bound search's
    // (search.cpp). The bound reported is the best exact one.
    const bool last = it + 1 >= max_iterations || Clock::now() >= deadline;
    const bool exact = it < 3 || it % 4 == 3 || last;
    for_each_piece(share, [&](size_t k) {
      PieceState& st = state[k];
      st.magnitude = 0;
      st.bound = exact ? st.dual->exact_bound(&st.magnitude) : static_cast<long double>(st.dual->quick_bound());
    });
    for (size_t k = 0; k < distinct.size(); ++k) {  // summed in piece order: the same for any thread count
      raw += distinct[k].count * state[k].bound;
      if (exact) magnitude += distinct[k].count * state[k].magnitude;
    }
    long double cap_term = 0;
    for (size_t k = 0; k < all_points; ++k) cap_term += static_cast<long double>(lam[k]) * rhs[k];
    raw -= cap_term;
    out.iterations = it + 1;
    if (exact) {
      const long double b = safe_integer_bound(raw, magnitude + std::fabs(cap_term));
      if (b > out.bound && on_bound && !on_bound(b)) stop = true;
      out.bound = std::max(out.bound, b);
      trace("block bound: iteration %d, bound %.0Lf", it, b);
    }
    best_by_iteration.push_back(out.bound);
    if (level_off > 0 && exact && it >= kLevelOffIterations) {
      const long double before = best_by_iteration[static_cast<size_t>(it - kLevelOffIterations)];
      if (std::isfinite(before) && out.bound - before < level_off * std::fabs(out.bound)) stop = true;
    }
    // The memory multipliers' subgradient at the decoded labels: each priced step's load
    // minus the limit.
    double norm2 = 0;
    std::vector<double> g(all_points);
    if (all_points > 0) {
      std::fill(load.begin(), load.end(), 0.0);
      for (size_t k = 0; k < distinct.size(); ++k) {
        const PieceModel& d = distinct[k];
        for (size_t i = 0; i < d.lo.size(); ++i) {
          const double u = static_cast<double>(d.model.usage[d.model.off[i] + static_cast<size_t>(state[k].labels[i])]);
          if (d.lo[i] < d.hi[i]) {
            load[static_cast<size_t>(d.lo[i])] += d.count * u;
            load[static_cast<size_t>(d.hi[i])] -= d.count * u;
          }
          if (d.own_lo[i] < d.own_hi[i]) {
            load[static_cast<size_t>(d.own_lo[i])] += d.count * u;
            load[static_cast<size_t>(d.own_hi[i])] -= d.count * u;
          }
        }
      }
      double run = 0;
      for (size_t k = 0; k < all_points; ++k) {
        run += load[k];
        g[k] = run - static_cast<double>(rhs[k]);
        if (lam[k] <= 0 && g[k] < 0) g[k] = 0;
        norm2 += g[k] * g[k];
      }
    }
    // The agreement multipliers move every kBalanceEvery-th pass only: each move changes the
    // copies' and sources' potentials, and the messages need a few passes to settle on them
    // before their reduced costs are worth balancing again. 405B (16x8x8, limit 30), bound
    // after ~260 iterations: every pass 18.18-18.37e12, every 2nd 18.48e12, every 4th
    // 18.58-18.73e12, every 8th 18.66e12 (still rising); 70B at limit 10 within its spread
    // (1.31-1.58% every 4th, 1.29-1.73% every pass).
    if (it % kBalanceEvery == 0) balance_agreements(distinct, state, mu);
    // Balancing alone can settle short of the optimum while the decoded copies still
    // disagree with their sources: on small chains without memory its bound stays put from
    // the 60th pass to the 200th, below the optimum in 21 of 24 chains (the GoogleTest).
    // A Polyak step on the disagreement, every pass, moves the multipliers on from there.
    // 70B on 16x16 (local batch 2, limit 10, no memory limit): gap 9.0-11.5% -> 3.1% (step
    // 0.01: 5.8%, 0.3: 3.8%, 1: 4.9%); at the H100 limit 9.7-10% -> 6.8-7.7%; within the
    // run-to-run spread on 70B 8x8x4 (1.66% -> 1.49%) and 405B 16x8x8 (5.80% -> 6.03%).
    // Steps only once the bound stalls (no rise in 8 passes) did better on small chains
    // under a tight limit but never started on those problems, whose bound creeps.
    if (upper >= 0 && !mu.empty()) {
      const double agree2 = agreement_subgradient(distinct, state, agreement_g);
      if (agree2 > 0) {
        const double a = kAgreementStep * std::max(0.0, static_cast<double>(upper) - static_cast<double>(raw)) / agree2;
        for (size_t k = 0; k < mu.size(); ++k)
          for (size_t s = 0; s < mu[k].size(); ++s) mu[k][s] += a * agreement_g[k][s];
      }
    }
    if (norm2 <= 0) continue;
    const double lagr = static_cast<double>(raw);
    if (lagr < prev) {
      fell = true;
      scale = std::max(scale * 0.6, 1e-4);
    } else if (!started) {
      scale = std::min(scale * (fell ? 1.1 : 1.3), 100.0);
    }
    prev = lagr;
    const double target = upper >= 0 ? static_cast<double>(upper) : std::fabs(lagr) * 1.5 + 1.0;
    const double gap = std::max(target - lagr, 1e-6 * std::fabs(target) + 1.0);
    // A Polyak step for the memory multipliers.
    const double alpha = scale * gap / (norm2 * span);
    for (size_t k = 0; k < all_points; ++k) lam[k] = std::max(0.0, lam[k] + alpha * g[k]);
  }
  char note[240];
  std::snprintf(note, sizeof note,
                "block bound: %d pieces, %d distinct, %zu priced steps and %zu own-step rows, %d iterations, bound %.0Lf",
                out.pieces, out.distinct, kept_points, own_points, out.iterations, out.bound);
  out.note = note;
  trace("%s", note);
  return out;
}

}  // namespace tlm::solver
