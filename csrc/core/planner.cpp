#include "core/planner.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>

#include "core/fold_blocks.h"
#include "core/plain_state.h"
#include "core/solver/block_bound.h"
#include "core/solver/solver.h"
#include "core/solver/trace.h"
#include "core/symmetry.h"

namespace tlm {

namespace {

BoundaryPolicy policy_of(const PlanOptions& o) {
  return BoundaryPolicy{o.mode == "train", o.fixed_params, o.input_specs, o.outputs == "replicated",
                        o.replicated_outputs, o.optimizer_states, o.like, o.recompute || o.recompute_only.has_value(),
                        o.recompute_only, o.bucket_bytes};
}

StrategyOptions strategy_options(const PlanOptions& o) {
  StrategyOptions so;
  so.fallback_replicate = o.fallback_replicate;
  return so;
}

// Stages 1 and 2 of a graph, kept together: the tables refer to the cost model.
struct Priced {
  CostModel cm;
  std::vector<NodeStrategies> strategies;
  CostTables tables;

  MemoryLimit limit;

  Priced(const Graph& g, const PlanOptions& o, bool materialize_edges)
      : cm(make_cost_model(o.device, o.calibration_json)),
        strategies(enumerate_graph_strategies(checked(g), strategy_options(o))),
        tables(cm, g.mesh),
        limit(memory_limit_of(o, cm)) {
    solver::trace("planner: strategies enumerated for %zu nodes", strategies.size());
    std::optional<int64_t> bytes;
    if (limit.bytes > 0) bytes = limit.bytes;
    build_cost_tables(g, strategies, cm, policy_of(o), bytes, materialize_edges, tables);
    solver::trace("planner: cost tables built (%zu distinct redistribution costs)", tables.redist.size());
  }

  static const Graph& checked(const Graph& g) {
    solver::trace("planner: %zu graph nodes", g.nodes.size());
    if (g.nodes.empty() || g.nodes.back().op != "output")
      throw InvalidArgument("graph: the last node must be the 'output' node");
    return g;
  }
};

}  // namespace

MemoryLimit memory_limit_of(const PlanOptions& o, const CostModel& cm) {
  if (o.memory_unlimited) return {0, "none (memory_limit=None)"};
  if (o.memory_limit_bytes) return {*o.memory_limit_bytes, "memory_limit option"};
  const double capacity = cm.device.memory_capacity;
  if (!(capacity > 0)) return {0, "none (device " + cm.device.name + " has no memory capacity)"};
  char why[160];
  std::snprintf(why, sizeof why, "device %s: %.1f GiB minus %.0f%% headroom", cm.device.name.c_str(),
                capacity / 1073741824.0, 100 * kDeviceMemoryHeadroom);
  return {static_cast<int64_t>(std::floor(capacity * (1 - kDeviceMemoryHeadroom))), why};
}

// The problem's strategies over all its nodes: what the solver's set-up times scale with.
static size_t strategy_count(const solver::Problem& problem) {
  size_t n = 0;
  for (const solver::Node& node : problem.nodes) n += node.strategies.size();
  return n;
}

// A bound proven apart from a solve raises the solve's: one from solver/block_bound.h, or a
// first solve's for a re-solve with reserves (which only add usage: every labelling that
// fits the re-solve fits the first problem at the same cost, and the re-solve's own bound,
// from a short limit, is often far weaker: 405B's gap went from 53% to 57% on the refit).
static void raise_bound(long double bound, double gap_tolerance, solver::SolveResult& r) {
  if (!(bound > static_cast<long double>(r.bound))) return;
  const double cost = static_cast<double>(r.cost);
  r.bound = std::min(static_cast<double>(bound), cost);
  r.gap = (cost - r.bound) / std::max(std::fabs(cost), 1.0);
  if (r.bound >= cost) r.optimal = true, r.status = "optimal";
  else if (r.gap <= gap_tolerance) r.status = "gap_tolerance";
}

// A bound on the full problem, block by block over what the fold found, within `seconds`
// (solver/block_bound.h); the folded plan's cost aims its steps when that plan fits.
static long double bound_by_blocks(const solver::Problem& problem, const FoldedStart& f, double seconds,
                                   int threads) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, seconds)));
  return solver::block_bound(problem, f.block_nodes, f.kept_steps, f.step_block, f.step_prices,
                             f.fits ? f.cost : __int128(-1), deadline, /*max_iterations=*/1 << 30, threads)
      .bound;
}

// Under a limit too short for the full solve (kFullSolveSetupSecondsPerStrategy) the folded
// plan is the plan: its result before any bound (the costs are times, never negative).
static solver::SolveResult folded_result(const FoldedStart& f) {
  solver::SolveResult r;
  r.solution = f.labels;
  r.cost = f.cost;
  r.bound = 0;
  const double cost = static_cast<double>(r.cost);
  r.gap = cost / std::max(std::fabs(cost), 1.0);
  r.optimal = r.cost <= 0;
  r.status = r.optimal ? "optimal" : "time_limit";
  r.milp_note = f.milp_note;
  r.step_prices = f.step_prices;
  return r;
}

// The solver bounds values as they are made; a redistributed input's buffer, held while its
// consumer runs, comes on top (memory_estimate.h): it depends on two nodes' choices, which
// the solver's per-strategy usages cannot say. Where the estimate is over the limit, each such
// step gets a reserve of what the estimate holds there beyond the solver's own load (the
// buffers, and where the two count a value differently, e.g. one made again for backward):
// a fixed node alive at that step only, so every other step keeps its room. The solver then
// starts again from the plan. A new plan may move its buffers elsewhere, so this repeats
// (reserves only grow) up to four times: the plan kept is the first that fits, or else the
// first. A re-solve stops at its first labelling that fits (a few steps' reserves: on 405B
// the repair came with the re-solve's first labelling, and running on to its limit found
// nothing cheaper). The re-solves run within what is left of the plan's limit (`end`) when
// that is at least what a re-solve needs to reach its repaired start
// (kRefitSecondsPerStrategy); else, or when none fits by then, past it, within half the
// first solve's time: a plan over the memory limit fails when it runs. A full solve keeps
// that time back (kRefitReserve).
// A re-solve from a plan reaches its repaired start after its reductions and the repair:
// 1.06 s for 405B's 4.8 M strategies (16x8x8), with a margin.
constexpr double kRefitSecondsPerStrategy = 0.3e-6;
// The time a full solve keeps back for that re-solve, in units of it: the re-solve, then the
// plan assembled again (0.33 s on 405B), the solve's own overrun (up to 0.26 s there) and a
// margin: at 1.5 two of three 405B runs had 1.47 and 1.56 s left for the 1.45 s needed.
constexpr double kRefitReserve = 1.75;

// `seconds` less the time kept back for that re-solve (at most half of it), for a problem of
// `strategies` strategies.
static double less_refit_reserve(double seconds, size_t strategies) {
  const double reserve = kRefitReserve * kRefitSecondsPerStrategy * static_cast<double>(strategies);
  return std::max(seconds - reserve, 0.5 * seconds);
}

static void fit_redistribution_buffers(const Graph& g, const PlanOptions& opt, const solver::SolveOptions& so, Priced& p,
                                       std::chrono::steady_clock::time_point end,
                                       solver::SolveResult& result, SymmetryResult& alike, Plan& plan) {
  using Clock = std::chrono::steady_clock;
  solver::Problem& problem = p.tables.problem;
  if (p.limit.bytes <= 0 || plan.summary.memory.peak <= p.limit.bytes || !problem.usage_limit) return;
  const size_t real_nodes = problem.nodes.size();
  std::vector<int64_t> reserve(g.nodes.size(), 0);  // by step (IR node); reserves only grow
  const Plan* over = &plan;  // the last plan over the limit
  Plan last_over;
  solver::Solution over_labels = result.solution;
  int round = 0;
  // Re-solves with growing reserves until one's plan fits or `deadline`; true when one fits
  // (then it is the plan).
  const double need = kRefitSecondsPerStrategy * static_cast<double>(strategy_count(problem));
  const auto solve_again = [&](Clock::time_point deadline) {
    constexpr int kRounds = 4;
    for (; round < kRounds; ++round) {
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      if (left <= 0) return false;  // before the reserves grow: a later call finds them grown
      const MemoryEstimate& m = over->summary.memory;
      const int64_t state = m.parameters + m.optimizer_state;
      const std::vector<__int128> load = solver::load_by_step(problem, over_labels, g.nodes.size());
      bool grew = false;
      for (size_t k = 0; k < m.timeline_nodes.size(); ++k) {
        const size_t i = static_cast<size_t>(m.timeline_nodes[k]);
        if (state + m.timeline_bytes[k] <= p.limit.bytes) continue;
        const int64_t unseen = state + m.timeline_bytes[k] - static_cast<int64_t>(load[i]);
        if (unseen > reserve[i]) reserve[i] = unseen, grew = true;
      }
      if (!grew) return false;
      int64_t reserved = 0;
      for (size_t i = 0; i < reserve.size(); ++i) {
        if (reserve[i] <= 0) continue;
        solver::Node hold;  // nothing to choose: one strategy, alive at step i only
        hold.start = static_cast<int64_t>(i);
        hold.end = hold.start + 1;
        hold.strategies.push_back({0, reserve[i]});
        problem.nodes.push_back(std::move(hold));
        reserved += reserve[i];
      }
      solver::trace("planner: round %d: redistribution buffers lift the plan over the limit; %zu steps get a "
                    "reserve (%lld bytes in all): solving again from the plan (%.1f s)",
                    round + 1, problem.nodes.size() - real_nodes, (long long)reserved, left);
      solver::Solution start = over_labels;  // the last plan, over the limit by what is now reserved
      start.resize(problem.nodes.size(), 0);
      solver::SolveOptions again_options = so;
      // Half of what is left, so that later rounds have time, but at least what a re-solve
      // needs to reach its repaired start.
      again_options.time_limit_s = round + 1 < kRounds ? std::max(0.5 * left, std::min(left, need)) : left;
      again_options.start = &start;
      // A repair of the plan is all a re-solve needs: it stops at its first labelling that
      // fits. (405B: a repair 0.2% dearer was in hand 1.1 s in; a re-solve that went on for
      // one within the gap tolerance ran to its 6.4 s limit, found nothing cheaper, and the
      // plan call took 36.6 s of its 30.)
      again_options.good_enough_cost = std::numeric_limits<double>::max();
      again_options.on_progress = nullptr;  // the progress reported is the first solve's
      std::optional<solver::SolveResult> again;
      try {
        again = solver::solve(problem, again_options);
      } catch (const solver::InfeasibleError&) {  // nothing fits with these reserves: the caller warns of the peak
      } catch (const std::runtime_error&) {        // no labelling found in the time
      }
      problem.nodes.resize(real_nodes);
      if (!again) return false;
      again->solution.resize(real_nodes);
      raise_bound(result.bound, /*gap_tolerance=*/0, *again);  // its status changes only if the bound meets its cost
      SymmetryResult again_alike = place_blocks_alike(g, p.tables, *again);  // before the plan: it may relabel
      over_labels = again->solution;
      Plan fitted = make_plan(g, p.strategies, p.tables, *again, opt.device, opt.mode, opt.optimizer_states);
      if (fitted.summary.memory.peak <= p.limit.bytes) {
        alike = again_alike;
        result = std::move(*again);
        plan = std::move(fitted);
        return true;
      }
      last_over = std::move(fitted);
      over = &last_over;
    }
    return false;
  };
  const double left = std::chrono::duration<double>(end - Clock::now()).count();
  solver::trace("planner: %.2f s left of the limit for a re-solve (%.2f s needed)", left, need);
  if (left >= need && solve_again(end)) return;
  // Past the limit only when no repair fits within it: a plan over the memory limit fails
  // when it runs.
  solve_again(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(0.5 * so.time_limit_s)));
}

static Plan plan_graph_once(const Graph& g, const PlanOptions& opt, std::shared_ptr<void>* working) {
  const auto t0 = std::chrono::steady_clock::now();
  // Held by a pointer so that the caller may free it later (its freeing takes a quarter of
  // a second on a 70B graph).
  std::shared_ptr<Priced> priced = std::make_shared<Priced>(g, opt, /*materialize_edges=*/true);
  Priced& p = *priced;
  solver::SolveOptions so;
  // Reading the IR and building the tables count against the limit, and so
  // does what follows the solve: assembling the plan and writing it take up to a
  // fifth of the build time (0.23 s after a 1.34 s build on a 70B graph; the
  // tables are freed after the call, off its time), so a third of it is kept back,
  // for a re-solve with buffer reserves as well. The solver always gets a little
  // time (its first labelling takes one pass over the tables).
  const double built = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  so.time_limit_s =
      std::max(opt.time_limit_s - opt.elapsed_before_s - opt.host_seconds - (1 + 1.0 / 3) * built,
               0.05 * opt.time_limit_s);
  so.seed = opt.seed;
  so.threads = opt.threads;
  so.gap_tolerance = opt.gap_tolerance;
  std::mutex progress_mutex;  // the solver reports from its threads
  std::vector<ProgressPoint> progress;
  so.on_progress = [&](double t, __int128 cost, double bound) {
    const ProgressPoint point{t, to_seconds(static_cast<solver::Cost>(cost)), bound * 1e-12};
    {
      std::lock_guard<std::mutex> lock(progress_mutex);
      progress.push_back(point);
    }
    if (opt.on_progress) opt.on_progress(point.seconds, point.cost, point.bound);
  };
  // Many repeated blocks: first the problem folded over them (fold_blocks.h), whose tied
  // plan starts the full solve. A share of the limit: the full solve's reductions and first
  // moves take a few seconds on a 3-D mesh's 70B problem, and its bound certifies the gap.
  std::optional<FoldedStart> folded;
  bool skip_full = false;  // the folded plan is the plan (kFullSolveSetupSecondsPerStrategy)
  solver::SolveOptions full_options = so;
  const size_t strategies = strategy_count(p.tables.problem);
  if (opt.fold_repeated) {
    const auto fold_t0 = std::chrono::steady_clock::now();
    double fold_time = fold_seconds(so.time_limit_s);
    const bool short_limit =
        so.time_limit_s - fold_time < 2 * kFullSolveSetupSecondsPerStrategy * static_cast<double>(strategies);
    if (short_limit) fold_time = std::max(0.5 * so.time_limit_s, so.time_limit_s - block_bound_seconds(so.time_limit_s));
    folded = solve_folded(g, p.tables, so, fold_time, /*plan_is_folded=*/short_limit);
    if (folded) {
      full_options.start = &folded->labels;
      full_options.start_prices = &folded->step_prices;
    }
    // What the fold took counts, whether or not it found a plan.
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - fold_t0).count();
    full_options.time_limit_s = std::max(so.time_limit_s - spent, 0.05 * so.time_limit_s);
    skip_full = short_limit && folded && folded->fits;
  }
  // A full solve's plan may need a re-solve for its redistribution buffers (405B on 16x8x8:
  // 15 of 40 logged runs before 2026-12-05, 17 of 19 that day; 70B's tied plans at a 10 s
  // limit, none in 40): its time is kept back, so that the re-solve and the plan's assembly
  // still end within the limit.
  if (!skip_full && p.limit.bytes > 0 && p.tables.problem.usage_limit)
    full_options.time_limit_s = less_refit_reserve(full_options.time_limit_s, strategies);
  // Beside the full solve, the bound on the full problem block by block (fold_blocks.h): on
  // the solve's second core in place of its own bound search until it levels off
  // (SolveOptions::bound_beside), or with one thread first, in a slice of the limit.
  long double block_bound = -std::numeric_limits<long double>::infinity();
  if (folded && !skip_full && so.threads >= 2) {
    const solver::Problem& problem = p.tables.problem;
    const FoldedStart& f = *folded;
    full_options.bound_beside = [&problem, &f](std::chrono::steady_clock::time_point until,
                                               const solver::SolveOptions::RaiseBound& raise) {
      return solver::block_bound(problem, f.block_nodes, f.kept_steps, f.step_block, f.step_prices,
                                 f.fits ? f.cost : __int128(-1), until, /*max_iterations=*/1 << 30,
                                 /*threads=*/1, kBlockBoundLevelOff, raise)
          .bound;
    };
  } else if (folded && !skip_full) {
    const double slice = block_bound_beside_full_seconds(so.time_limit_s);
    if (full_options.time_limit_s > 3 * slice) {
      const auto block_t0 = std::chrono::steady_clock::now();
      block_bound = bound_by_blocks(p.tables.problem, *folded, slice, so.threads);
      full_options.time_limit_s -= std::chrono::duration<double>(std::chrono::steady_clock::now() - block_t0).count();
    }
  }
  solver::SolveResult result;
  if (skip_full) {
    // Its gap is certified on the full problem block by block, in the time left. When the
    // plan it makes is over the limit (its redistribution buffers, after the members untied
    // into unused memory), the re-solve that mends it keeps its time back from that bound,
    // as a full solve's does: 70B (8x8x4) at a 60 GiB limit, 10 s, had -0.11 s left for a
    // re-solve needing 0.96 s, which then ran past the limit (plan call 10.3-10.5 s). A trial
    // plan takes ~0.1 s on 70B.
    const auto trial_t0 = std::chrono::steady_clock::now();
    result = folded_result(*folded);
    double bound_seconds = full_options.time_limit_s;
    if (p.limit.bytes > 0 && p.tables.problem.usage_limit) {
      solver::SolveResult trial = result;
      place_blocks_alike(g, p.tables, trial);  // as the plan below will be (it may relabel)
      const Plan tried = make_plan(g, p.strategies, p.tables, trial, opt.device, opt.mode, opt.optimizer_states);
      if (tried.summary.memory.peak > p.limit.bytes) {
        const double before = bound_seconds;
        bound_seconds = less_refit_reserve(bound_seconds, strategies);
        solver::trace("planner: the tied plan is over the limit with its buffers: %.2f s kept back for a re-solve",
                      before - bound_seconds);
      }
      bound_seconds -= std::chrono::duration<double>(std::chrono::steady_clock::now() - trial_t0).count();
    }
    raise_bound(bound_by_blocks(p.tables.problem, *folded, bound_seconds, so.threads), so.gap_tolerance, result);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - built;
  } else {
    try {
      result = solver::solve(p.tables.problem, full_options);
    } catch (const solver::InfeasibleError& e) {
      if (!opt.like.empty())
        throw solver::InfeasibleError("like='" + opt.like + "': no plan of this graph keeps every activation on its " +
                                      "own rank (" + e.what() + "); some op's only rules need communication on the " +
                                      "batch (e.g. batch statistics or an op without a sharding rule). Expected a " +
                                      "model whose ops all shard over the batch, or like=None.");
      if (p.limit.bytes <= 0) throw;
      throw solver::InfeasibleError("no plan fits the per-rank memory limit of " +
                                    std::to_string(p.limit.bytes) + " bytes (" + p.limit.source +
                                    "): " + e.what() +
                                    ". Expected a larger mesh, a smaller batch, " +
                                    (opt.recompute || opt.recompute_only ? std::string()
                                                   : std::string("recompute=True (the solver may then recompute "
                                                                 "activations in backward instead of keeping them), ")) +
                                    "or a larger memory_limit (memory_limit=None plans without one).");
    }
  }
  raise_bound(block_bound, so.gap_tolerance, result);
  solver::trace("planner: solved");
  SymmetryResult alike = place_blocks_alike(g, p.tables, result);
  Plan plan = make_plan(g, p.strategies, p.tables, result, opt.device, opt.mode, opt.optimizer_states);
  // What is left of the limit for re-solves: the solve's share, less a third of the build for
  // assembling the plan again and writing it.
  const auto end = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(
                            opt.time_limit_s - opt.elapsed_before_s - opt.host_seconds - built / 3));
  fit_redistribution_buffers(g, opt, so, p, end, result, alike, plan);
  plan.summary.repeated_blocks = alike.blocks;
  if (folded) plan.summary.folded = folded->note, plan.summary.folded_cost = folded->cost;
  plan.summary.blocks_alike = alike.alike;
  plan.summary.asymmetry_gain_s = std::isfinite(alike.asymmetry_gain_s) ? alike.asymmetry_gain_s : -1;
  solver::trace("planner: plan assembled");
  plan.summary.memory_limit = p.limit.bytes;
  plan.summary.memory_limit_source = p.limit.source;
  plan.summary.build_seconds = built;
  if (!result.solution.empty()) {  // the end point: the solver reports at most once a second
    progress.push_back({result.seconds, to_seconds(static_cast<solver::Cost>(result.cost)), result.bound * 1e-12});
    if (opt.on_progress) opt.on_progress(progress.back().seconds, progress.back().cost, progress.back().bound);
  }
  plan.summary.solver_progress = std::move(progress);
  if (working != nullptr) *working = std::move(priced);  // the plan holds copies, nothing of the tables
  return plan;
}

// The solver's summary with a plan's cost and a bound repriced (plain_state.h); the gap follows.
static void set_cost_and_bound(SolverSummary& s, __int128 cost, long double bound) {
  s.cost = cost;
  s.bound = static_cast<double>(std::min<long double>(bound, static_cast<long double>(cost)));
  s.gap = static_cast<double>((static_cast<long double>(cost) - s.bound) /
                              std::max<long double>(std::fabs(static_cast<long double>(cost)), 1));
}

// The share of a plan call's limit that the plan replicating all state may take: its
// problem has no free parameter, so it is small and its solve ends on its gap.
constexpr double kReplicatedStateShare = 0.25;

// The options of the best plan replicating all state (a train plan with plain state asked
// for), when that plan can differ from the free solve's by more than its price and fits
// memory: no torch plan asked for, no state fixed elsewhere than Replicate, some dispatch
// to spare (plain_state.h).
static std::optional<PlanOptions> replicated_state_options(const Graph& g, const PlanOptions& opt,
                                                           const CostModel& cm) {
  if (!opt.like.empty()) return std::nullopt;
  if (!(state_dispatch_seconds(g, cm, opt.optimizer_states) > 0)) return std::nullopt;
  const MemoryLimit limit = memory_limit_of(opt, cm);
  if (limit.bytes > 0 && replicated_state_bytes(g, opt.optimizer_states) > limit.bytes) return std::nullopt;
  PlanOptions all = opt;
  all.plain_replicated_state = false;
  const PlacementSpec replicate(g.mesh.shape.size(), Placement::replicate());
  bool any_free = false;
  for (const IrNode& node : g.nodes) {
    if (!is_state(node)) continue;
    auto [it, added] = all.fixed_params.emplace(target_of(node), replicate);
    if (!added && it->second != replicate) return std::nullopt;  // the caller shards it
    any_free = any_free || added;
  }
  if (!any_free) return std::nullopt;  // the free solve is this plan already
  const double left = opt.time_limit_s - opt.elapsed_before_s - opt.host_seconds;
  all.time_limit_s = kReplicatedStateShare * left;
  all.elapsed_before_s = all.host_seconds = 0;
  all.on_progress = nullptr;
  return all;
}

Plan plan_graph(const Graph& g, const PlanOptions& opt, std::shared_ptr<void>* working) {
  if (!opt.plain_replicated_state || opt.mode != "train") return plan_graph_once(g, opt, working);
  const CostModel cm = make_cost_model(opt.device, opt.calibration_json);
  // The free solve prices every parameter's optimizer step as DTensors run it; the runtime
  // holds the state plain when the plan replicates all of it, which no per-node price can
  // say. So the best plan replicating all state is solved first, in a share of the limit,
  // priced plain, and kept when it is cheaper than the free solve's plan.
  std::optional<Plan> all_replicated;
  double all_spared = 0;
  PlanOptions rest = opt;
  if (const auto all = replicated_state_options(g, opt, cm)) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      all_replicated = plan_graph_once(g, *all, nullptr);
      all_spared = price_state_plain(g, cm, opt.optimizer_states, *all_replicated);
    } catch (const solver::InfeasibleError&) {  // e.g. over the memory limit with its activations
    }
    rest.elapsed_before_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  Plan plan = plan_graph_once(g, rest, working);
  const double spared = price_state_plain(g, cm, opt.optimizer_states, plan);
  // The solver's cost and bound in the same terms. Every plan either replicates all state
  // (the second solve's problem, less what holding it plain spares) or is in the free
  // solve's; without a second solve a plan replicating all state may be cheaper than the
  // free solve's bound by what it spares.
  long double bound = plan.summary.solver.bound - static_cast<long double>(to_cost(spared));
  if (all_replicated)
    bound = std::min<long double>(plan.summary.solver.bound,
                                  all_replicated->summary.solver.bound - static_cast<long double>(to_cost(all_spared)));
  double chosen_spared = spared;
  if (all_replicated && all_replicated->summary.estimated_step_s < plan.summary.estimated_step_s) {
    solver::trace("planner: the plan replicating all state, held plain, is cheaper (%.4g s against %.4g s)",
                  all_replicated->summary.estimated_step_s, plan.summary.estimated_step_s);
    all_replicated->summary.solver_progress = std::move(plan.summary.solver_progress);
    plan = std::move(*all_replicated);
    chosen_spared = all_spared;
  }
  set_cost_and_bound(plan.summary.solver, plan.summary.solver.cost - to_cost(chosen_spared), bound);
  return plan;
}

namespace {

// The index of `want` among `offered`, or -1.
int strategy_index(const std::vector<OpStrategy>& offered, const OpStrategy& want) {
  for (size_t k = 0; k < offered.size(); ++k)
    if (offered[k].inputs == want.inputs && offered[k].outputs == want.outputs) return static_cast<int>(k);
  return -1;
}

int spec_index(const std::vector<PlacementSpec>& offered, const PlacementSpec& want) {
  for (size_t k = 0; k < offered.size(); ++k)
    if (offered[k] == want) return static_cast<int>(k);
  return -1;
}

// The previous plan's labels on `p`'s problem, or a reason they do not apply.
std::string previous_labels(const Graph& g, const Priced& p, const Plan& previous, solver::Solution& labels) {
  const size_t n = g.nodes.size();
  if (previous.nodes.size() != n)
    return "the program has " + std::to_string(n) + " nodes at the new sizes, the planned one " +
           std::to_string(previous.nodes.size());
  labels.assign(p.tables.problem.nodes.size(), -1);
  for (size_t i = 0; i + 1 < n; ++i) {
    if (previous.nodes[i].op != g.nodes[i].op)
      return "node " + g.nodes[i].name + " is " + g.nodes[i].op + " at the new sizes, " + previous.nodes[i].op +
             " in the plan";
    labels[i] = strategy_index(p.strategies[i].strategies, previous.nodes[i].strategy);
    if (labels[i] < 0)
      return "node " + g.nodes[i].name + " (" + g.nodes[i].op + "): its planned strategy is not offered at the new " +
             "sizes (a sharded dim no longer divides)";
  }
  const std::vector<PlacementSpec>& leaving = previous.nodes.back().strategy.inputs;
  if (leaving.size() != p.tables.sink_of_output.size()) return "the program's outputs differ at the new sizes";
  for (size_t j = 0; j < leaving.size(); ++j) {
    const int s = p.tables.sink_of_output[j];
    if (s < 0) continue;
    const OutputSink& sink = p.tables.sinks[static_cast<size_t>(s)];
    labels[static_cast<size_t>(sink.problem_node)] = spec_index(sink.specs, leaving[j]);
    if (labels[static_cast<size_t>(sink.problem_node)] < 0)
      return "output " + std::to_string(j) + " cannot leave in its planned spec at the new sizes";
  }
  for (const RecomputeSite& r : p.tables.recompute) {  // kept or recomputed as planned
    const int s = labels[static_cast<size_t>(r.node)];
    labels[static_cast<size_t>(r.hold)] = 2 * s + (previous.nodes[static_cast<size_t>(r.node)].recompute ? 1 : 0);
    labels[static_cast<size_t>(r.tail)] = s;
  }
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0) return "problem node " + std::to_string(i) + " has no label from the plan";
  return "";
}

}  // namespace

PlanTransfer transfer_plan(const Graph& g, const PlanOptions& opt, const Plan& previous, double tolerance) {
  if (!(tolerance >= 0)) throw InvalidArgument("transfer_plan: tolerance must be >= 0");
  const auto t0 = std::chrono::steady_clock::now();
  Priced p(g, opt, /*materialize_edges=*/true);
  PlanTransfer out;
  solver::Solution labels;
  out.reason = previous_labels(g, p, previous, labels);
  if (!out.reason.empty()) return out;
  const solver::Evaluation kept = solver::evaluate(p.tables.problem, labels);
  if (!kept.feasible) {
    out.reason = "the planned choice breaks a constraint at the new sizes (" +
                 (kept.violations.empty() ? std::string("?") : kept.violations.front()) + ")";
    return out;
  }
  out.previous_cost_s = to_seconds(static_cast<solver::Cost>(kept.cost));
  // A short search at the new sizes: what a re-plan could gain, and a bound on it.
  solver::SolveOptions so;
  so.time_limit_s = std::max(0.02, 0.1 * opt.time_limit_s);
  so.seed = opt.seed;
  so.threads = opt.threads;
  so.gap_tolerance = tolerance / 2;
  solver::SolveResult quick;
  try {
    quick = solver::solve(p.tables.problem, so);
  } catch (const solver::InfeasibleError&) {
    quick.cost = kept.cost;  // the kept labels are feasible, so this cannot happen; keep them if it does
    quick.bound = static_cast<double>(kept.cost);
  }
  if (quick.solution.empty()) quick.cost = kept.cost;  // no labelling in the time given: nothing to compare
  out.best_cost_s = to_seconds(static_cast<solver::Cost>(std::min(quick.cost, kept.cost)));
  out.bound_s = quick.bound * 1e-12;
  if (static_cast<double>(kept.cost) > (1 + tolerance) * static_cast<double>(quick.cost)) {
    char why[200];
    std::snprintf(why, sizeof why, "a plan %.1f%% cheaper exists at the new sizes (%.4g s vs %.4g s)",
                  100 * (1 - static_cast<double>(quick.cost) / static_cast<double>(kept.cost)), out.best_cost_s,
                  out.previous_cost_s);
    out.reason = why;
    return out;
  }
  solver::SolveResult r;
  r.solution = labels;
  r.cost = kept.cost;
  r.bound = std::min(quick.bound, static_cast<double>(kept.cost));
  r.gap = (static_cast<double>(kept.cost) - r.bound) / std::max(std::abs(static_cast<double>(kept.cost)), 1.0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.status = "transferred";
  r.milp_note = quick.milp_note;
  Plan plan = make_plan(g, p.strategies, p.tables, r, opt.device, opt.mode, opt.optimizer_states);
  if (opt.plain_replicated_state) {  // the state stays as the first plan put it: held plain if all replicated
    const solver::Cost spared = to_cost(price_state_plain(g, p.cm, opt.optimizer_states, plan));
    SolverSummary& s = plan.summary.solver;
    set_cost_and_bound(s, s.cost - spared, static_cast<long double>(s.bound) - static_cast<long double>(spared));
  }
  plan.summary.memory_limit = p.limit.bytes;
  plan.summary.memory_limit_source = p.limit.source;
  plan.summary.build_seconds = r.seconds;
  out.plan = std::move(plan);
  return out;
}

solver::Problem planner_problem(const Graph& g, const PlanOptions& opt) {
  Priced p(g, opt, /*materialize_edges=*/true);
  return p.tables.problem;
}

BuildStats build_only(const Graph& g, const PlanOptions& opt) {
  Priced p(g, opt, /*materialize_edges=*/false);
  BuildStats s;
  s.nodes = static_cast<int64_t>(p.tables.problem.nodes.size());
  s.strategies = static_cast<int64_t>(strategy_count(p.tables.problem));
  s.edges = p.tables.edge_count;
  s.edge_matrix_entries = p.tables.edge_matrix_entries;
  s.distinct_redistribution_costs = static_cast<int64_t>(p.tables.redist.size());
  return s;
}

Explanation explain_planned_node(const Graph& g, const PlanOptions& opt, const Plan& plan, int node) {
  const CostModel cm = make_cost_model(opt.device, opt.calibration_json);
  return explain_node(g, plan, cm, node, strategy_options(opt), opt.optimizer_states, policy_of(opt).train);
}

ReplicationReason replication_reason_of_plan(const Graph& g, const PlanOptions& opt, const Plan& plan) {
  const CostModel cm = make_cost_model(opt.device, opt.calibration_json);
  return replication_reason(g, plan, cm, strategy_options(opt), opt.optimizer_states, policy_of(opt).train);
}

OpWork graph_work(const Graph& g) {
  OpWork total;
  StrategyOptions sopt;  // replicate fallback: any op is priced, unknown ones as elementwise
  for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
    const IrNode& n = g.nodes[i];
    if (n.op == "placeholder" || n.op == "output") continue;
    NodeStrategies st = enumerate_strategies(g, i, sopt);
    OpWork w = op_work(g, i, st.strategies.at(0));
    total.flops += w.flops;
    total.bytes += w.bytes;
  }
  return total;
}

json::Value rank_call_args(const Graph& g, const Plan& plan, const std::vector<int64_t>& coord) {
  if (plan.nodes.size() != g.nodes.size())
    throw InvalidArgument("plan has " + std::to_string(plan.nodes.size()) + " nodes but the graph has " +
                          std::to_string(g.nodes.size()) + " (plan and graph do not match)");
  if (coord.size() != g.mesh.ndim())
    throw InvalidArgument("mesh coordinate has " + std::to_string(coord.size()) + " dims, the mesh " +
                          std::to_string(g.mesh.ndim()));
  json::Value::Array out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const IrNode& node = g.nodes[i];
    if (node.op == "placeholder" || node.op == "output") out.emplace_back(nullptr);
    else out.push_back(local_call_args(g, static_cast<int>(i), plan.nodes[i].strategy, coord));
  }
  return json::Value(std::move(out));
}

}  // namespace tlm
