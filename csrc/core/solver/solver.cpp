// solve(): reduce, search, optionally hand the reduced model to HiGHS, expand,
// evaluate. The reported cost always comes from the independent evaluator on
// the full problem.
#include "core/solver/solver.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/solver/highs_api.h"
#include "core/solver/milp.h"
#include "core/solver/model.h"
#include "core/solver/search.h"
#include "core/solver/trace.h"

namespace tlm::solver {
namespace {

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

}  // namespace

SolveResult solve(const Problem& problem, const SolveOptions& options) {
  const auto t0 = Clock::now();
  if (!std::isfinite(options.time_limit_s) || options.time_limit_s <= 0)
    throw std::invalid_argument("time_limit: expected a finite number of seconds > 0, got " +
                                std::to_string(options.time_limit_s));
  if (options.threads < 1)
    throw std::invalid_argument("threads: expected at least 1, got " + std::to_string(options.threads));
  if (!(options.gap_tolerance >= 0 && options.gap_tolerance < 1))
    throw std::invalid_argument("gap_tolerance: expected a fraction in [0, 1), got " +
                                std::to_string(options.gap_tolerance));
  if (options.start != nullptr) {
    if (options.start->size() != problem.nodes.size())
      throw std::invalid_argument("start: expected one strategy per node (" + std::to_string(problem.nodes.size()) +
                                  "), got " + std::to_string(options.start->size()));
    for (size_t i = 0; i < problem.nodes.size(); ++i)
      if ((*options.start)[i] < 0 || static_cast<size_t>((*options.start)[i]) >= problem.nodes[i].strategies.size())
        throw std::invalid_argument("start: node " + std::to_string(i) + " has no strategy " +
                                    std::to_string((*options.start)[i]));
  }
  // Exact mode proves optimality: no tolerance.
  validate(options.search);
  SolveOptions opts = options;
  if (opts.exact) opts.gap_tolerance = 0;
  const SearchOptions& so = opts.search;
  PhaseLedger ledger;
  std::string highs_why;
  const bool have_highs = highs_api(&highs_why) != nullptr;
  if (options.exact && !have_highs)
    throw MilpUnavailableError(std::string("exact mode needs HiGHS to prove optimality, but ") + kHighsUnavailable +
                               " (" + highs_why + ")");
  const auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(std::max(0.0, options.time_limit_s)));
  trace("solve: %zu nodes, %zu edges, limit %.1fs", problem.nodes.size(), problem.edges.size(), options.time_limit_s);
  // Dominance checks and eliminations may take reduce_share of the budget.
  Reduction red = [&] {
    PhaseTimer timer(&ledger, Phase::Reduce);
    return reduce(problem, true, t0 + std::chrono::duration_cast<Clock::duration>((deadline - t0) * so.reduce_share));
  }();
  const Model& m = red.model;
  trace("%s; model strategies %zu", red.summary.c_str(), m.strat.size());
  auto report = [&](const SearchResult& s) {
    if (options.on_progress && !s.labels.empty())
      options.on_progress(std::chrono::duration<double>(Clock::now() - t0).count(), m.offset + s.cost,
                          static_cast<double>(static_cast<long double>(m.offset) + s.bound));
  };
  SearchResult found;
  bool proven = false;
  if (m.n > 0) {
    // Small reduced models go to HiGHS after the heuristic even without
    // exact mode: there it usually proves optimality within seconds.
    const bool small =
        milp_within(m, static_cast<size_t>(so.whole_milp_columns), static_cast<size_t>(so.whole_milp_nonzeros));
    const bool use_milp = options.exact || small;
    // The heuristic gets the whole budget unless HiGHS follows; then half.
    auto search_deadline = use_milp ? t0 + (deadline - t0) / 2 : deadline;
    found = lagrangian_search(m, opts, search_deadline, report, /*allow_lns=*/!use_milp, &ledger);
    const bool heuristic_optimal = !found.labels.empty() && static_cast<long double>(found.cost) <= found.bound;
    proven = heuristic_optimal;
    const bool close_enough =
        !found.labels.empty() &&
        (within_gap(found.cost, found.bound, static_cast<long double>(m.offset), opts.gap_tolerance) ||
         good_enough(static_cast<long double>(m.offset) + static_cast<long double>(found.cost), opts.good_enough_cost));
    if (use_milp && !close_enough && seconds_left(deadline) > 0) {
      // Reduced-cost fixing: with a labelling of cost UB in hand, a strategy
      // whose reduced cost lifts the Lagrangian bound above UB is in no
      // better solution, so HiGHS never sees it.
      std::vector<int> kept;
      Model restricted;
      const Model* milp_model = &m;
      if (!found.labels.empty() && !found.reduced_cost.empty()) {
        const long double room = static_cast<long double>(found.cost) - found.rc_bound;
        std::vector<char> keep(m.strat.size(), 0);
        size_t dropped = 0;
        for (size_t k = 0; k < keep.size(); ++k) {
          keep[k] = static_cast<long double>(found.reduced_cost[k]) <= room + 1e-7L * std::fabs(room) + 1.0L;
          dropped += !keep[k];
        }
        for (int i = 0; i < m.n; ++i) keep[m.off[i] + found.labels[i]] = 1;
        if (dropped > 0) {
          restricted = restrict_strategies(m, keep, &kept);
          milp_model = &restricted;
        }
      }
      std::vector<int> start;
      if (!found.labels.empty())
        start = milp_model != &m ? to_restricted(restricted, kept, found.labels) : found.labels;
      MilpOptions mo;
      mo.time_limit_s = seconds_left(milp_phase_end(t0, deadline, so.milp_tail_share));
      mo.threads = options.threads;
      mo.seed = options.seed;
      mo.rel_gap = opts.gap_tolerance;
      if (!start.empty()) mo.start = &start;
      MilpResult mr = [&] {
        PhaseTimer timer(&ledger, Phase::FinalMilp);
        return solve_milp(*milp_model, mo);
      }();
      if (milp_model != &m && !mr.labels.empty()) mr.labels = from_restricted(restricted, kept, mr.labels);
      if (mr.ran) {
        if (mr.infeasible && found.labels.empty())
          throw InfeasibleError("infeasible: HiGHS proved the reduced problem (" + red.summary +
                                ") has no solution meeting the usage limit and the forbidden pairs together");
        if (!mr.labels.empty()) {
          // Keep whichever labelling is cheaper, by exact evaluation on the model.
          __int128 c = 0;
          for (int i = 0; i < m.n; ++i) c += m.cost[m.off[i] + mr.labels[i]];
          bool ok = true;
          for (const auto& e : m.edges) {
            Cost x = m.mat[e.off + static_cast<size_t>(mr.labels[e.u]) * m.num_strategies(e.v) + mr.labels[e.v]];
            if (x == kInfiniteCost) ok = false;
            else c += x;
          }
          if (ok && (found.labels.empty() || c < found.cost)) {
            ledger.improved(Phase::FinalMilp, static_cast<double>(found.labels.empty() ? c : found.cost - c));
            found.labels = mr.labels;
            found.cost = c;
          }
        }
        if (std::isfinite(mr.dual_bound)) {
          // HiGHS' bound includes the offset; costs are integers, tolerances are relative 1e-9-ish.
          long double b = std::ceil(static_cast<long double>(mr.dual_bound) - static_cast<long double>(m.offset) -
                                    1e-7L * std::fabs(static_cast<long double>(mr.dual_bound)) - 1e-6L);
          found.bound = std::max(found.bound, b);
        }
        proven = mr.optimal;
      }
    }
    if (found.labels.empty())
      throw std::runtime_error("no feasible solution found within " + std::to_string(options.time_limit_s) +
                               " s (" + red.summary + "); feasibility is not disproved");
  } else {
    found.bound = 0;
    proven = true;
  }
  SolveResult r;
  if (!have_highs) r.milp_note = std::string(kHighsUnavailable) + " (" + highs_why + ")";
  r.solution = red.expand(found.labels);
  Evaluation ev = evaluate(problem, r.solution);
  if (!ev.feasible) throw std::logic_error("solver produced an infeasible solution: " + ev.violations.front());
  r.cost = ev.cost;
  long double bound = static_cast<long double>(m.offset) + found.bound;
  if (proven) bound = std::max(bound, static_cast<long double>(r.cost));
  r.bound = static_cast<double>(std::min<long double>(bound, static_cast<long double>(r.cost)));
  r.optimal = static_cast<long double>(r.cost) <= bound;
  r.gap = static_cast<double>((static_cast<long double>(r.cost) - r.bound) /
                              std::max<long double>(std::fabs(static_cast<long double>(r.cost)), 1.0L));
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.phases = ledger.totals();
  for (size_t k = 0; k < found.point_price.size() && k < m.point_time.size(); ++k)
    if (found.point_price[k] > 0) r.step_prices.emplace_back(m.point_time[k], found.point_price[k]);
  if (trace_on())
    for (const auto& ph : r.phases)
      trace("phase %-16s %8.2f s in %5d runs, %4d improvements, gain %.6g", ph.name.c_str(), ph.seconds, ph.runs,
            ph.improvements, ph.gain);
  r.status = r.optimal                         ? "optimal"
             : r.gap <= opts.gap_tolerance ? "gap_tolerance"
             : good_enough(static_cast<long double>(r.cost), opts.good_enough_cost) ? "good_enough"
             : (Clock::now() >= deadline ? "time_limit" : "stalled");
  return r;
}

}  // namespace tlm::solver
