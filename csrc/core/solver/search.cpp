#include "core/solver/search.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/solver/coarse_milp.h"
#include "core/solver/coarsen.h"
#include "core/solver/dual.h"
#include "core/solver/forest.h"
#include "core/solver/greedy_start.h"
#include "core/solver/kick.h"
#include "core/solver/highs_api.h"
#include "core/solver/coarse_lns.h"
#include "core/solver/cost_math.h"
#include "core/solver/merge.h"
#include "core/solver/milp.h"
#include "core/solver/primal.h"
#include "core/solver/trace.h"

namespace tlm::solver {

double next_price_rate(double rate, bool over, std::optional<bool> was_over) {
  if (was_over && *was_over != over) return std::max(rate * 0.5, 0.01);
  return over ? std::min(rate * 1.2, 4.0) : std::max(rate * 0.7, 0.01);
}

long double safe_integer_bound(long double b, long double magnitude) {
  // Message passing is exact up to double rounding: allow 1e-9 of the terms' size.
  return std::ceil(b - 1e-9L * magnitude - 1e-6L);
}

namespace {

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// Load minus capacity per check point for a labelling.
std::vector<double> overuse(const Model& m, const std::vector<int>& x) {
  std::vector<double> diff(m.cap.size() + 1, 0.0);
  for (int i = 0; i < m.n; ++i) {
    Usage u = m.usage[m.off[i] + x[i]];
    if (u == 0 || m.plo[i] >= m.phi[i]) continue;
    diff[m.plo[i]] += static_cast<double>(u);
    diff[m.phi[i]] -= static_cast<double>(u);
  }
  std::vector<double> g(m.cap.size());
  double load = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    load += diff[k];
    g[k] = load - static_cast<double>(m.cap[k]);
  }
  return g;
}

// The largest share of a check point's capacity a labelling uses (0 without memory rows).
double fullest_point(const Model& m, const std::vector<int>& x) {
  const std::vector<double> g = overuse(m, x);
  double most = 0;
  for (size_t k = 0; k < g.size(); ++k)
    if (m.cap[k] > 0) most = std::max(most, 1.0 + g[k] / static_cast<double>(m.cap[k]));
  return most;
}

// What the two searches share: the best labelling (the primal side writes
// it) and the best bound (the dual side writes it); each stops when they meet.
struct Shared {
  std::mutex mu;
  bool found = false;
  __int128 cost = 0;
  std::vector<int> labels;
  long double bound = -std::numeric_limits<long double>::infinity();
  std::atomic<bool> done{false};
  std::vector<double> reduced_cost;  // at the best bound (dual side only)
  long double rc_bound = 0;
  std::vector<double> memory_price;  // per node: its multipliers summed, at the best bound
  std::vector<double> point_price;   // per check point, at the best bound
  std::atomic<int> price_version{0};  // bumped whenever memory_price changes
  RecentPool pool;                   // kick results, for solution merging
  PhaseLedger* ledger = nullptr;     // time and improvements per phase
  // The latest groups (coarsen.h) and the UB they were built for: workers
  // asking for the same UB share them (one coarsening takes seconds on 3-D
  // meshes, and two at once only compete for memory bandwidth).
  std::mutex groups_mu;
  std::shared_ptr<const Coarsening> groups;
  __int128 groups_ub = -1;
  const SearchOptions* so = nullptr;

  explicit Shared(const SearchOptions& options, PhaseLedger* l)
      : pool(static_cast<size_t>(options.merge_pool)), ledger(l), so(&options) {}
  long double gap_tolerance = 0;     // stop once (cost - bound) <= this x |offset + cost|
  long double offset = 0;            // the model's offset: gaps are relative to the full cost

  long double good_enough = -1;      // stop once offset + cost <= this (>= 0)

  // Caller holds mu.
  bool close_enough() const {
    return found && (within_gap(cost, bound, offset, gap_tolerance) ||
                     solver::good_enough(offset + static_cast<long double>(cost), good_enough));
  }

  void remember(const std::vector<int>& x, __int128 c) {
    std::lock_guard<std::mutex> lock(mu);
    pool.add(x, c);
  }
  // The pool's labellings when it changed `changes` times since `version`.
  bool pool_if_changed(int* version, int changes, std::vector<std::vector<int>>* out) {
    std::lock_guard<std::mutex> lock(mu);
    if (pool.version() < *version + changes) return false;
    *version = pool.version();
    *out = pool.members();
    return true;
  }

  bool offer(const std::vector<int>& x, __int128 c, Phase phase) {
    std::lock_guard<std::mutex> lock(mu);
    if (found && c >= cost) return false;
    if (ledger) ledger->improved(phase, static_cast<double>(found ? cost - c : c));
    found = true;
    cost = c;
    labels = x;
    if (close_enough()) done = true;
    return true;
  }
  void raise_bound(long double b) {
    std::lock_guard<std::mutex> lock(mu);
    if (b <= bound) return;
    bound = b;
    if (close_enough()) done = true;
  }
  // Copies the best labelling when there is one costing less than `than`
  // (any cost when `than` < 0).
  bool best_below(__int128 than, std::vector<int>* x, __int128* c) {
    std::lock_guard<std::mutex> lock(mu);
    if (!found || (than >= 0 && cost >= than)) return false;
    *x = labels;
    *c = cost;
    return true;
  }
  bool upper(double* ub) {
    std::lock_guard<std::mutex> lock(mu);
    if (found) *ub = static_cast<double>(cost);
    return found;
  }
};

// Each node's memory multipliers summed over the check points it is alive at (its price per
// usage unit); 0 for a node alive at none.
std::vector<double> summed_prices(const Model& m, const std::vector<double>& lam) {
  std::vector<double> prefix(lam.size() + 1, 0.0);
  for (size_t k = 0; k < lam.size(); ++k) prefix[k + 1] = prefix[k] + lam[k];
  std::vector<double> out(static_cast<size_t>(m.n), 0.0);
  for (int i = 0; i < m.n; ++i)
    if (m.plo[i] < m.phi[i]) out[static_cast<size_t>(i)] = prefix[m.phi[i]] - prefix[m.plo[i]];
  return out;
}

// Dual side: message passing on cost + sum_k lambda_k * usage (a Lagrangian
// of the memory constraints), lambda by projected subgradient steps. Every
// bound it reports is exact for the lambda it was computed with.
//
// Step length: Polyak's, toward the best labelling's cost, times a scale that grows while
// the Lagrangian rises and shrinks (x0.6) when it falls. Until its first fall the scale
// grows fast (x1.3), then slowly (x1.1), up to 100: on a Llama-3-70B recompute instance
// (30k nodes, 20k memory points, an iteration 0.45 s) the old rule (x1.1 up to 2) still
// rose by the same amount every step when the time ran out, its steps too short by ~10x.
void bound_search(const Model& m, const DualSolver::EdgeCosts& mat, Shared& sh, Clock::time_point soft_end,
                  Clock::time_point deadline, int max_stall, int max_iterations = std::numeric_limits<int>::max(),
                  const std::vector<double>* lam0 = nullptr) {
  if (Clock::now() >= std::min(soft_end, deadline)) return;  // its set-up alone takes seconds on 3-D meshes
  DualSolver dual(m, mat);
  std::vector<double> lam(m.cap.size(), 0.0), node_lam(m.n, 0.0);
  // Each node's potentials carry its usage times the multipliers summed over its points.
  auto apply_multipliers = [&] {
    const std::vector<double> summed = summed_prices(m, lam);
    std::vector<double> delta(m.n, 0.0);
    for (int i = 0; i < m.n; ++i) {
      delta[i] = summed[i] - node_lam[i];
      node_lam[i] = summed[i];
    }
    dual.add_penalty(delta);
  };
  if (lam0 != nullptr && lam0->size() == lam.size()) {  // start from the caller's multipliers
    lam = *lam0;
    apply_multipliers();
  }
  std::vector<int> labels;
  // Points are strongly correlated (a node spans many): scale steps by the mean span.
  double span = 0;
  int with_points = 0;
  for (int i = 0; i < m.n; ++i)
    if (m.plo[i] < m.phi[i]) span += m.phi[i] - m.plo[i], ++with_points;
  span = with_points ? std::max(1.0, span / with_points) : 1.0;
  double scale = 0.5, prev = -1e300, best_quick = -1e300;
  std::vector<double> best_lam;  // the multipliers of best_quick, the best Lagrangian
  bool fell = false;  // the Lagrangian fell once: the scale is near its working size
  long double last = -std::numeric_limits<long double>::infinity();
  int stall = 0;
  // Past soft_end it goes on, up to `deadline`, while it has run fewer than 200 iterations:
  // the subgradient needs hundreds to settle, and a model this slow (Llama-3-70B: 0.5-0.9 s
  // an iteration, its bound still rising 2-10% of the gap a second at soft_end) gains more
  // from them than from kicks (0.1-0.8% there). Fast models hand over at soft_end as before.
  constexpr int kSettled = 200;
  // The first iteration always runs: a small model's primal side may be done before this
  // thread starts, and without it the gap would be the separable bound's, by timing alone.
  for (int it = 0; (it == 0 || !sh.done) && it < max_iterations && Clock::now() < deadline &&
                   (it < kSettled || Clock::now() < soft_end);
       ++it) {
    dual.forward(labels);
    dual.backward();
    long double cap_term = 0;
    for (size_t k = 0; k < lam.size(); ++k) cap_term += static_cast<long double>(lam[k]) * m.cap[k];
    // The exact bound (long double, every edge read) every fourth iteration, and whenever
    // the quick one beats every earlier one: a step that raised it is not lost to the next.
    const double lagr = dual.quick_bound() - static_cast<double>(cap_term);
    const bool periodic = it < 3 || it % 4 == 3;
    if (periodic || lagr > best_quick) {
      best_quick = std::max(best_quick, lagr);
      long double mag = 0;
      long double raw = dual.exact_bound(&mag) - cap_term;
      long double b = safe_integer_bound(raw, mag + std::fabs(cap_term));
      if (b > last) {
        std::vector<double> rc = dual.reduced_costs();
        std::lock_guard<std::mutex> lock(sh.mu);
        sh.reduced_cost = std::move(rc);
        sh.rc_bound = raw - 1e-9L * (mag + std::fabs(cap_term)) - 1e-6L;
        sh.memory_price = node_lam;
        sh.point_price = lam;
        ++sh.price_version;
      }
      sh.raise_bound(b);
      trace("bound search: iteration %d, bound %.0Lf", it, b);
      // The first bound always counts (against -inf the tolerance is NaN, and every check
      // used to count as a stall: the search stopped after max_stall checks, rising or not).
      if (!std::isfinite(last) || b > last + 1e-7L * std::fabs(last) + 0.5L) {
        last = b;
        stall = 0;
      } else if (periodic && ++stall > max_stall) {
        break;
      }
    }
    if (lam.empty()) continue;
    std::vector<double> g = overuse(m, labels);
    double norm2 = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      if (lam[k] <= 0 && g[k] < 0) g[k] = 0;
      norm2 += g[k] * g[k];
    }
    if (norm2 <= 0) continue;
    if (lagr < prev) fell = true;
    scale = lagr < prev ? std::max(scale * 0.6, 1e-4) : std::min(scale * (fell ? 1.1 : 1.3), 100.0);
    prev = lagr;
    // A step that overshot far (the Lagrangian fell by more than bound_undo_fall of the best:
    // half, unless the caller says otherwise) is undone: back to the best multipliers, the
    // scale halved once more, the next step from there. One such step on Llama-3-70B's folded
    // problem (bound 9.8e12 -> 0.005e12, the best labelling then 3x the bound) cost ~20-100
    // iterations of recovery.
    if (lagr >= best_quick) {
      best_lam = lam;
    } else if (best_quick > 0 && lagr < (1 - sh.so->bound_undo_fall) * best_quick && !best_lam.empty()) {
      lam = best_lam;
      scale = std::max(scale * 0.5, 1e-4);
      prev = best_quick;
      apply_multipliers();
      continue;
    }
    double ub = 0;
    double target = sh.upper(&ub) ? ub : std::fabs(lagr) * 1.5 + 1.0;
    // A labelling far above the bound (a greedy start through "practically forbidden"
    // entries: IOPDDL's A, L and S start at ~2e18 for optima near 1e9) would make a Polyak
    // step of that size, after which the bound never recovered (A: -1.9e14 at iteration 1,
    // 0.52e9 at 5 s). Once the Lagrangian is positive the target is at most 101 times it;
    // the shrinking scale handles the rest. (A cap at 4 times cost T and D 3-6% of their
    // 5 s bounds; from a Lagrangian of zero, as a knapsack's all-keep start gives, no cap
    // applies, else the first steps would be nothing.)
    if (lagr > 0) target = std::min(target, 101.0 * lagr);
    double alpha = scale * std::max(target - lagr, 1e-6 * std::fabs(target) + 1.0) / (norm2 * span);
    for (size_t k = 0; k < lam.size(); ++k) lam[k] = std::max(0.0, lam[k] + alpha * g[k]);
    apply_multipliers();
  }
}

// Range maximum over check points (sparse table), for per-node prices.
class RangeMax {
 public:
  explicit RangeMax(const std::vector<double>& v) {
    size_t n = v.size();
    table_.push_back(v);
    for (size_t w = 1; 2 * w <= n; w *= 2) {
      const auto& prev = table_.back();
      std::vector<double> next(n - 2 * w + 1);
      for (size_t k = 0; k < next.size(); ++k) next[k] = std::max(prev[k], prev[k + w]);
      table_.push_back(std::move(next));
    }
  }
  double max(size_t l, size_t r) const {  // [l, r), l < r
    size_t level = 0;
    while ((static_cast<size_t>(2) << level) <= r - l) ++level;
    size_t w = static_cast<size_t>(1) << level;
    return std::max(table_[level][l], table_[level][r - w]);
  }

 private:
  std::vector<std::vector<double>> table_;
};

// Lagrangian kicks (kick.h) at a random scale of the bound search's
// latest memory prices; both workers run them.
class PricedKicks {
 public:
  explicit PricedKicks(Shared& sh) : sh_(sh) {}
  // True when there are prices to kick with (fetched when they changed).
  bool ready() {
    const int v = sh_.price_version.load();
    if (v != version_) {
      std::lock_guard<std::mutex> lock(sh_.mu);
      version_ = sh_.price_version.load();
      base_ = sh_.memory_price;
      any_ = std::any_of(base_.begin(), base_.end(), [](double p) { return p > 0; });
      price_.resize(base_.size());
    }
    return any_;
  }
  // Half the kicks also scale each group's prices by its own random factor,
  // so different groups turn lean (the same prices keep leading back to
  // the same labellings).
  bool run(const Model& m, const Coarsening& cs, ForestMoves& moves, Primal& primal, std::mt19937_64& rng,
           Clock::time_point deadline) {
    const double f = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
    if (rng() % 2) {
      std::uniform_real_distribution<double> noise(0.6, 1.4);
      group_f_.resize(cs.coarse.n);
      for (double& g : group_f_) g = f * noise(rng);
      for (size_t i = 0; i < base_.size(); ++i) price_[i] = group_f_[cs.group_of[i]] * base_[i];
    } else {
      for (size_t i = 0; i < base_.size(); ++i) price_[i] = f * base_[i];
    }
    return priced_kick(m, moves, primal, price_, rng, deadline);
  }

 private:
  Shared& sh_;
  int version_ = 0;
  bool any_ = false;
  std::vector<double> base_, price_, group_f_;
};

// Groups for a labelling of cost `ub`, shared with the other workers; null
// when the deadline passes first. When grouping fails (ub below every
// labelling): null for an estimated ub (`labelling_cost` false), else the
// identity (a real labelling's cost cannot fail, but a search must not die of it).
std::shared_ptr<const Coarsening> groups_for(const Model& m, Shared& sh, __int128 ub, Clock::time_point deadline,
                                             bool labelling_cost = true) {
  std::lock_guard<std::mutex> lock(sh.groups_mu);
  if (sh.groups && sh.groups_ub == ub) return sh.groups;
  try {
    sh.groups = std::make_shared<const Coarsening>(coarsen(m, ub, deadline));
  } catch (const CoarsenTimeout&) {
    return nullptr;
  } catch (const std::logic_error& e) {
    if (!labelling_cost) return nullptr;
    trace("grouping failed (%s); single nodes instead", e.what());
    sh.groups = std::make_shared<const Coarsening>(identity_coarsening(m));
  }
  sh.groups_ub = ub;
  return sh.groups;
}

// A worker's steps (its entries of schedule_table(), in order) with their
// functions; a function reports whether it ran.
template <class W>
struct Step {
  const ScheduledStep* info;
  bool (W::*run)(const ScheduledStep&);
};

template <class W>
using StepFunctions = std::vector<std::pair<const char*, bool (W::*)(const ScheduledStep&)>>;

template <class W>
std::vector<Step<W>> steps_of(Worker worker, const StepFunctions<W>& functions) {
  std::vector<Step<W>> out;
  for (const ScheduledStep& s : schedule_table()) {
    if (s.worker != worker) continue;
    auto f = std::find_if(functions.begin(), functions.end(),
                          [&](const auto& nf) { return std::string(nf.first) == s.name; });
    if (f == functions.end())
      throw std::logic_error(std::string("solver schedule: step '") + s.name + "' has no function in its worker");
    out.push_back({&s, f->second});
  }
  return out;
}

// One loop step of a worker: the schedule's due steps through their functions.
template <class W>
void run_due(W& worker, const std::vector<Step<W>>& steps, const SearchOptions& so, Worker which, long s) {
  run_schedule(so, which, s, [&](const ScheduledStep& due_step) {
    for (const Step<W>& st : steps)
      if (st.info == &due_step) return (worker.*st.run)(due_step);
    return false;  // not reached: steps_of gave each of the worker's steps its function
  });
}

// Large-neighbourhood search over regions of groups from the shared best
// labelling (coarse_lns.h), with the other steps of its schedule (forest
// moves, Lagrangian kicks, merges) in between; the groups are rebuilt as the
// best improves (a lower UB prunes and groups more). Several workers may run
// at once: each adopts the shared best when it is better than its own. Only
// a worker given `progress` reports.
class LnsWorker {
 public:
  LnsWorker(const Model& m, Shared& sh, Clock::time_point deadline, uint64_t seed,
            const std::function<void()>* progress, std::shared_ptr<const Coarsening> cs, __int128 cs_ub)
      : m_(m), sh_(sh), so_(*sh.so), deadline_(deadline), seed_(seed), progress_(progress), primal_(m),
        cs_(std::move(cs)), cs_ub_(cs_ub), rng_(seed * 0x9E3779B97F4A7C15ULL + 1),
        nbh_(std::make_unique<CoarseLns>(m, *cs_)), moves_(std::make_unique<ForestMoves>(m, *cs_)),
        lagrangian_(sh),
        steps_(steps_of<LnsWorker>(Worker::Regions, {{"forest", &LnsWorker::forest},
                                                     {"lagrangian_kick", &LnsWorker::lagrangian_kick},
                                                     {"merge", &LnsWorker::merge},
                                                     {"live_region", &LnsWorker::live_region},
                                                     {"tight_region", &LnsWorker::tight_region},
                                                     {"region", &LnsWorker::random_region}})) {
    lo_.region_columns = static_cast<size_t>(so_.region_columns);
    lo_.region_groups = static_cast<int>(so_.region_groups);
    lo_.max_strategies = static_cast<int>(so_.region_strategies);
  }

  void run(const std::vector<int>& start) {
    primal_.set(start);
    for (; !sh_.done && Clock::now() < deadline_; ++step_) {
      left_ = std::chrono::duration<double>(deadline_ - Clock::now()).count();
      if (left_ < 0.05) break;
      // Another worker found better: continue from there.
      if (sh_.best_below(primal_.cost(), &adopted_, &adopted_cost_)) primal_.set(adopted_);
      if (primal_.cost() < cs_ub_ - cs_ub_ / 20) {
        nbh_.reset();
        moves_.reset();
        cs_ = groups_for(m_, sh_, primal_.cost(), deadline_);
        if (!cs_) break;
        cs_ub_ = primal_.cost();
        nbh_ = std::make_unique<CoarseLns>(m_, *cs_);
        moves_ = std::make_unique<ForestMoves>(m_, *cs_);
        trace("coarse model rebuilt: %d groups, %zu strategies", cs_->coarse.n, cs_->coarse.strat.size());
      }
      run_due(*this, steps_, so_, Worker::Regions, step_);
    }
    trace("coarse lns (seed %llu): %d steps, %d improving, %d Lagrangian kicks improving, %d merges improving, final %s, region columns %zu",
          static_cast<unsigned long long>(seed_), step_, wins_, priced_wins_, merge_wins_,
          to_string(primal_.cost()).c_str(), lo_.region_columns);
  }

 private:
  bool forest(const ScheduledStep& s) {
    PhaseTimer timer(sh_.ledger, s.phase);
    if (moves_->sweep(primal_, rng_) > 0) sh_.offer(primal_.labels(), primal_.cost(), s.phase);
    return true;
  }

  // A fraction of a region's time.
  bool lagrangian_kick(const ScheduledStep& s) {
    if (!lagrangian_.ready()) return false;
    PhaseTimer timer(sh_.ledger, s.phase);
    const std::vector<int> before = primal_.labels();
    const __int128 before_cost = primal_.cost();
    const bool ok = lagrangian_.run(m_, *cs_, *moves_, primal_, rng_, deadline_);
    if (ok) sh_.remember(primal_.labels(), primal_.cost());
    if (ok && primal_.cost() < before_cost) {
      sh_.offer(primal_.labels(), primal_.cost(), s.phase);
      ++priced_wins_;
    } else {
      primal_.set(before);
    }
    return true;
  }

  // Solution merging (merge.h) once the kicks brought in enough new labellings.
  bool merge(const ScheduledStep& s) {
    if (!(Clock::now() - last_merge_ > seconds(so_.merge_interval_s) &&
          sh_.pool_if_changed(&pool_version_, static_cast<int>(so_.merge_min_new), &pool_)))
      return false;
    PhaseTimer timer(sh_.ledger, s.phase);
    last_merge_ = Clock::now();
    std::vector<int> x = primal_.labels();
    __int128 c = primal_.cost();
    const auto merge_end = std::min(deadline_, Clock::now() + seconds(so_.merge_budget_s));
    MergeResult mr = merge_solutions(
        m_, pool_, x, c, merge_end, seed_ + step_, static_cast<size_t>(so_.whole_coarse_milp_columns),
        [&](const std::vector<int>& y, __int128 yc) { sh_.offer(y, yc, s.phase); },
        [&]() { return sh_.done.load(); });
    if (mr.improved) primal_.set(x), ++merge_wins_;
    trace("merge %s: cost %s", mr.improved ? "improved" : "did not improve", to_string(c).c_str());
    return true;
  }

  // Regions: connected ones around a group live at a tight point, with the
  // groups live at that point added (they compete for the same memory,
  // wherever they sit in the graph), and connected ones anywhere.
  bool live_region(const ScheduledStep& s) {
    if (m_.cap.empty()) return false;
    return solve_region(s, [&] {
      int k = -1;
      const int center = nbh_->tight_center(primal_, rng_, &k);
      CoarseLnsOptions part = lo_;
      part.region_columns = lo_.region_columns * 3 / 5;
      std::vector<int> region = nbh_->region_from(center, primal_, part);
      if (k >= 0) {
        CoarseLnsOptions wide = lo_;
        wide.region_groups = INT32_MAX;
        region = nbh_->region_live_at(k, primal_, wide, rng_, std::move(region));
      }
      return region;
    });
  }

  bool tight_region(const ScheduledStep& s) {
    if (m_.cap.empty()) return false;
    return solve_region(s, [&] { return nbh_->region_from(nbh_->tight_center(primal_, rng_), primal_, lo_); });
  }

  bool random_region(const ScheduledStep& s) {
    return solve_region(s, [&] {
      return nbh_->region_from(static_cast<int>(rng_() % cs_->coarse.n), primal_, lo_);
    });
  }

  // Re-solves the region `shape` builds; regions HiGHS cannot finish in time
  // shrink, quick ones grow.
  template <class Shape>
  bool solve_region(const ScheduledStep& s, Shape shape) {
    PhaseTimer timer(sh_.ledger, s.phase);
    const std::vector<int> region = shape();
    if (region.empty()) return true;
    const double budget = std::min(so_.region_budget_s, left_);
    const auto t_step = Clock::now();
    if (nbh_->step(primal_, region, lo_, budget, seed_ + step_)) {
      sh_.offer(primal_.labels(), primal_.cost(), s.phase);
      ++wins_;
    }
    const double used = std::chrono::duration<double>(Clock::now() - t_step).count();
    if (used > 0.8 * budget)
      lo_.region_columns = std::max(static_cast<size_t>(so_.region_columns_min), lo_.region_columns * 7 / 10);
    else if (used < 0.2 * budget)
      lo_.region_columns = std::min(static_cast<size_t>(so_.region_columns_max), lo_.region_columns * 6 / 5);
    if (progress_ && *progress_ && Clock::now() - last_report_ > std::chrono::seconds(1)) {
      last_report_ = Clock::now();
      (*progress_)();
    }
    return true;
  }

  const Model& m_;
  Shared& sh_;
  const SearchOptions& so_;
  const Clock::time_point deadline_;
  const uint64_t seed_;
  const std::function<void()>* progress_;
  Primal primal_;
  std::shared_ptr<const Coarsening> cs_;
  __int128 cs_ub_;
  Clock::time_point last_report_ = Clock::now();
  std::mt19937_64 rng_;
  std::unique_ptr<CoarseLns> nbh_;
  std::unique_ptr<ForestMoves> moves_;
  CoarseLnsOptions lo_;
  PricedKicks lagrangian_;
  const std::vector<Step<LnsWorker>> steps_;
  int wins_ = 0, step_ = 0, priced_wins_ = 0, merge_wins_ = 0, pool_version_ = 0;
  std::vector<std::vector<int>> pool_;
  Clock::time_point last_merge_ = Clock::now();
  double left_ = 0;  // seconds to the deadline at this step's start
  std::vector<int> adopted_;
  __int128 adopted_cost_ = 0;
};

void lns_worker(const Model& m, Shared& sh, Clock::time_point deadline, uint64_t seed,
                const std::function<void()>* progress) {
  std::vector<int> start;
  __int128 start_cost = 0;
  if (!sh.best_below(-1, &start, &start_cost) || Clock::now() >= deadline) return;
  auto cs = groups_for(m, sh, start_cost, deadline);
  if (!cs || Clock::now() >= deadline) return;
  LnsWorker(m, sh, deadline, seed, progress, std::move(cs), start_cost).run(start);
}

// Iterated local search on groups, for the core the bound search leaves
// free: kicks (kick.h) from the shared best, priced or directed or near a
// tight point as its schedule says, keeping results that beat it.
class KickWorker {
 public:
  KickWorker(const Model& m, Shared& sh, Clock::time_point deadline, uint64_t seed)
      : m_(m), sh_(sh), deadline_(deadline), rng_(seed), primal_(m), lagrangian_(sh),
        steps_(steps_of<KickWorker>(Worker::Kicks, {{"priced_kick", &KickWorker::priced_kick},
                                                    {"directed_kick", &KickWorker::directed_kick},
                                                    {"near_tight_kick", &KickWorker::near_tight_kick}})) {}

  void run(std::vector<int> best, __int128 best_cost) {
    best_ = std::move(best);
    best_cost_ = best_cost;
    trace("kicks start (%s memory prices)", lagrangian_.ready() ? "with" : "without");
    for (; !sh_.done && Clock::now() < deadline_; ++kicks_) {
      sh_.best_below(best_cost_, &best_, &best_cost_);
      if (cs_ub_ < 0 || best_cost_ < cs_ub_ - cs_ub_ / 20) {
        regions_.reset();
        moves_.reset();
        cs_ = groups_for(m_, sh_, best_cost_, deadline_);
        if (!cs_) break;
        cs_ub_ = best_cost_;
        moves_ = std::make_unique<ForestMoves>(m_, *cs_);
        regions_ = std::make_unique<CoarseLns>(m_, *cs_);
        if (Clock::now() >= deadline_) break;
      }
      primal_.set(best_);
      run_due(*this, steps_, *sh_.so, Worker::Kicks, kicks_);
    }
    trace("kicks: %d, %d improving (%d priced), final %s", kicks_, wins_, priced_wins_,
          to_string(best_cost_).c_str());
  }

 private:
  // At a random scale of the bound search's memory prices, once there are any.
  bool priced_kick(const ScheduledStep& s) {
    if (!lagrangian_.ready()) return false;
    PhaseTimer timer(sh_.ledger, s.phase);
    keep_if_better(lagrangian_.run(m_, *cs_, *moves_, primal_, rng_, deadline_), true, s);
    return true;
  }

  bool directed_kick(const ScheduledStep& s) {
    PhaseTimer timer(sh_.ledger, s.phase);
    keep_if_better(kick(m_, *cs_, *moves_, *regions_, primal_, rng_, true, false, deadline_), false, s);
    return true;
  }

  bool near_tight_kick(const ScheduledStep& s) {
    PhaseTimer timer(sh_.ledger, s.phase);
    keep_if_better(kick(m_, *cs_, *moves_, *regions_, primal_, rng_, false, true, deadline_), false, s);
    return true;
  }

  void keep_if_better(bool ok, bool priced, const ScheduledStep& s) {
    if (ok) sh_.remember(primal_.labels(), primal_.cost());
    if (ok && primal_.cost() < best_cost_) {
      best_ = primal_.labels();
      best_cost_ = primal_.cost();
      sh_.offer(best_, best_cost_, s.phase);
      ++wins_;
      priced_wins_ += priced;
    }
  }

  const Model& m_;
  Shared& sh_;
  const Clock::time_point deadline_;
  std::mt19937_64 rng_;
  std::vector<int> best_;
  __int128 best_cost_ = 0;
  std::shared_ptr<const Coarsening> cs_;
  std::unique_ptr<ForestMoves> moves_;
  std::unique_ptr<CoarseLns> regions_;
  __int128 cs_ub_ = -1;
  Primal primal_;
  PricedKicks lagrangian_;
  const std::vector<Step<KickWorker>> steps_;
  int kicks_ = 0, wins_ = 0, priced_wins_ = 0;
};

void kick_worker(const Model& m, Shared& sh, Clock::time_point deadline, uint64_t seed) {
  std::vector<int> best;
  __int128 best_cost = 0;
  if (!sh.best_below(-1, &best, &best_cost)) return;
  KickWorker(m, sh, deadline, seed).run(std::move(best), best_cost);
}

// Primal side: message passing on cost + price * usage, where a node's price
// is the highest price among the points it is live at, and prices rise where
// the decoded labelling overflows and decay where it fits. Each decoded
// labelling is repaired to fit, improved by local search and offered.
//
// From a caller's start that fills the memory limit (kick_from_start: the fold's tied
// plan of a memory-bound model) there is no price phase, and a model too large for the
// whole coarse MILP gets kicks instead of the region search. There the price phase's
// cold prices decode labellings far over the limit, repaired far above the start: 405B's
// full problem, 10 iterations in 9 s at 1.4-7.6 times its cost; 70B's, 110 iterations in
// 117 s of a 300 s solve, none below the start, while 23 of its 137 kicks improved it.
// Where memory is loose the price phase stays: from 8B's tied plan (27 of 67 GiB) its
// decoded labellings improved the start 6 times and 514 kicks did not once.
void primal_search(const Model& m, const DualSolver::EdgeCosts& mat, Shared& sh, Clock::time_point deadline,
                   int max_stall, const std::function<void()>& progress, uint64_t seed, bool allow_lns,
                   bool kick_from_start) {
  const auto t_start = Clock::now();
  const bool lns = allow_lns && highs_api() != nullptr;
  // With HiGHS at hand, the price-guided phase only builds a good start.
  const SearchOptions& so = *sh.so;
  // The price phase always gets price_share of the time; past it, it goes on
  // (up to price_share_max) only while it keeps improving. On cores that do
  // not fold it is the phase that pays most early; elsewhere it stalls soon.
  const auto span = deadline - t_start;
  const auto phase1_floor =
      lns ? t_start + std::chrono::duration_cast<Clock::duration>(span * so.price_share) : deadline;
  const auto phase1_end = kick_from_start && lns ? t_start
                          : lns ? t_start + std::chrono::duration_cast<Clock::duration>(
                                                span * std::max(so.price_share, so.price_share_max))
                                : deadline;
  auto price_timer = std::make_unique<PhaseTimer>(sh.ledger, Phase::Price);
  if (Clock::now() >= deadline) return;
  std::optional<DualSolver> guide;  // built only when the phase runs (its edge factoring: ~0.5 s on 405B)
  if (Clock::now() < phase1_end) guide.emplace(m, mat);
  Primal primal(m);
  std::vector<int> labels;
  // Group moves (coarsen.h, forest.h): memory repair by whole groups and
  // forest moves for labellings close to the best. These groups are a
  // heuristic restriction: their UB is the least of the best cost, ten times
  // the cheapest unconstrained estimate, and the model's "practically
  // forbidden" scale, so huge entries are pruned before any good labelling
  // is known. (The exact phases below coarsen with a real labelling's cost.)
  std::mt19937_64 frng(seed + 7);
  std::shared_ptr<const Coarsening> coarse;
  std::unique_ptr<ForestMoves> forest;
  __int128 coarse_ub = 0, decoded_min = -1;
  auto best_cost = [&]() -> __int128 {
    std::lock_guard<std::mutex> lock(sh.mu);
    return sh.found ? sh.cost : -1;
  };
  const __int128 huge = huge_cost_threshold(m);
  const __int128 practical_ub = huge > 0 ? sum_of_minima(m) + huge : -1;
  auto ensure_groups = [&]() {
    __int128 best = best_cost();
    __int128 ub = -1;
    for (__int128 c : {best, decoded_min >= 0 ? 10 * decoded_min : __int128{-1}, practical_ub})
      if (c >= 0 && (ub < 0 || c < ub)) ub = c;
    if (ub < 0 || (coarse && ub >= coarse_ub / 2)) return;
    auto fresh = groups_for(m, sh, ub, deadline, /*labelling_cost=*/ub == best);
    if (!fresh) return;  // out of time, or ub below every labelling: keep the old groups
    forest.reset();
    coarse = std::move(fresh);
    forest = std::make_unique<ForestMoves>(m, *coarse);
    coarse_ub = ub;
    trace("groups: %d for %d nodes (%d in groups of 2+), %zu coarse edges, %zu strategies", coarse->coarse.n, m.n,
          coarse->grouped_nodes, coarse->coarse.edges.size(), coarse->coarse.strat.size());
  };
  // The first feasible iterate is always polished: the best so far may be the greedy
  // start, far above what the polished iterates reach (8.8e12 against 7.5e12 on a
  // Llama-3-70B recompute instance when that one was skipped). Later ones are polished
  // when they come within 5% of the best plan, or, every 8th iteration at most, within 5%
  // of the best iterate before its polish: polished plans can sit far below any raw
  // iterate, and with that test alone no iterate was polished again after the first few
  // (405B at a 30 s limit: 20.30 s plans against 19.94-20.03 s with the second test;
  // IOPDDL D, K, U, V at 5 s: 2-18% cheaper, none worse by more than 0.3%).
  bool polished = false;
  __int128 best_raw = -1;  // the least cost of an iterate before its polish
  int since_polish = 0;
  auto polish = [&]() {
    const __int128 best = best_cost();
    const __int128 raw = primal.cost();
    const bool near_best = best >= 0 && raw <= best + best / 20;
    const bool near_raw = best_raw >= 0 && raw <= best_raw + best_raw / 20 && since_polish >= 8;
    if (best_raw < 0 || raw < best_raw) best_raw = raw;
    ++since_polish;
    if (!forest || (polished && !near_best && !near_raw)) return;
    polished = true;
    since_polish = 0;
    const auto t0 = Clock::now();
    int sw = 0;
    for (; sw < 8 && Clock::now() < deadline && forest->sweep(primal, frng) > 0; ++sw) primal.improve();
    if (trace_on())
      trace("polish: %d sweeps %.2fs, %s -> %s", sw, std::chrono::duration<double>(Clock::now() - t0).count(),
            to_string(raw).c_str(), to_string(primal.cost()).c_str());
  };
  std::vector<double> price(m.cap.size(), 0.0), node_price(m.n, 0.0);
  // Price unit: the median cost per byte between a node's cheapest and its leanest strategy.
  std::vector<double> ratios;
  for (int i = 0; i < m.n; ++i) {
    size_t cheap = m.off[i], lean = m.off[i];
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) {
      if (m.cost[k] < m.cost[cheap]) cheap = k;
      if (m.usage[k] < m.usage[lean]) lean = k;
    }
    if (m.plo[i] < m.phi[i] && m.usage[cheap] > m.usage[lean] && m.cost[lean] > m.cost[cheap])
      ratios.push_back(static_cast<double>(m.cost[lean] - m.cost[cheap]) / static_cast<double>(m.usage[cheap] - m.usage[lean]));
  }
  double unit = 0;
  if (!ratios.empty()) {
    std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
    unit = ratios[ratios.size() / 2];
  }
  double rate = 0.5;
  std::optional<bool> was_over;  // the last iteration's overflow; none before the first
  int stall = 0;
  auto last_report = Clock::now();
  auto last_improved = Clock::now();
  int it = 0;
  for (; !sh.done && Clock::now() < phase1_end; ++it) {
    guide->forward(labels);
    guide->backward();
    primal.set(labels);
    if (it == 0) {
      // Estimate of the unconstrained optimum: the first decoded labelling
      // polished by exact forest moves with the memory limit ignored (a
      // decoded labelling alone can still pay thousands of huge entries).
      Primal free(m);
      free.set(labels);
      // Sweeps stop at 1/50 of the price phase: on the largest models one
      // sweep takes ~0.2 s, and six of them pushed the first polished plan
      // past the end of a short solve (70B at a 12 s limit: no polish at all).
      ForestMoves fine(m);
      const auto estimate_end = std::min(deadline, Clock::now() + (phase1_end - t_start) / 50);
      for (int sw = 0; sw < 6 && Clock::now() < estimate_end && fine.sweep(free, frng, nullptr, false) > 0; ++sw) {
      }
      if (free.conflicts() == 0) decoded_min = free.cost();
      trace("unconstrained estimate %s (decoded %s)", to_string(free.cost()).c_str(), to_string(primal.cost()).c_str());
    }
    if (primal.conflicts() == 0 && (decoded_min < 0 || primal.cost() < decoded_min)) decoded_min = primal.cost();
    ensure_groups();
    if (Clock::now() >= deadline) break;
    bool improved = false;
    // One-node repair first (cheap); by whole groups when that fails or
    // ends on practically forbidden entries; chain moves for what forbidden entries remain.
    const auto t_it = Clock::now();
    auto since = [&t_it]() { return std::chrono::duration<double>(Clock::now() - t_it).count(); };
    bool rep = primal.repair(deadline);
    const double t_repair = since();
    if (forest && (!rep || primal.conflicts() > 0 || (practical_ub > 0 && primal.cost() > practical_ub))) {
      primal.set(labels);
      rep = forest->repair(primal) || primal.repair(deadline);
    }
    const double t_group = since();
    if (rep && primal.conflicts() > 0)
      rep = primal.clear_conflicts(std::min(deadline, Clock::now() + (phase1_end - t_start) / 50)) || primal.memory_ok();
    const double t_clear = since();
    if (rep) {
      primal.improve();
      if (primal.feasible()) polish();
      if (primal.feasible()) improved = sh.offer(primal.labels(), primal.cost(), Phase::Price);
    }
    if (trace_on())
      trace("price iteration %d: repair %.2fs, group repair %.2fs, clear %.2fs, rest %.2fs; memory %s, %d forbidden, "
            "cost %s",
            it, t_repair, t_group - t_repair, t_clear - t_group, since() - t_clear, primal.memory_ok() ? "fits" : "over",
            primal.conflicts(), to_string(primal.cost()).c_str());
    stall = improved ? 0 : stall + 1;
    if (stall > max_stall) break;
    // With the exact phases to follow, a price phase that stopped improving
    // hands over early: nothing new for 50 iterations and for max(3 s, half
    // the time it took to the last improvement).
    if (improved) last_improved = Clock::now();
    if (lns && sh.found && stall >= static_cast<int>(so.price_handover_iterations) &&
        (Clock::now() >= phase1_floor ||
         Clock::now() - last_improved >
             std::max<Clock::duration>(seconds(so.price_handover_s), (last_improved - t_start) / 2)))
      break;
    if (progress && Clock::now() - last_report > std::chrono::seconds(1)) {
      last_report = Clock::now();
      progress();
    }
    if (price.empty()) continue;
    std::vector<double> g = overuse(m, labels);
    bool any_over = false;
    for (size_t k = 0; k < g.size(); ++k) {
      double rel = g[k] / std::max(1.0, static_cast<double>(m.cap[k]));
      if (rel > 0) {
        price[k] += rate * unit * std::min(rel, 1.0) + 1e-3 * rate * unit;
        any_over = true;
      } else if (rel < -0.02) {
        price[k] *= 0.9;
      }
    }
    rate = next_price_rate(rate, any_over, was_over);
    was_over = any_over;
    RangeMax rmax(price);
    std::vector<double> delta(m.n, 0.0);
    for (int i = 0; i < m.n; ++i) {
      if (m.plo[i] >= m.phi[i]) continue;
      double v = rmax.max(m.plo[i], m.phi[i]);
      delta[i] = v - node_price[i];
      node_price[i] = v;
    }
    guide->add_penalty(delta);
  }
  trace("price phase: %d iterations, best %s", it, sh.found ? to_string(sh.cost).c_str() : "none");
  price_timer.reset();
  if (!lns) return;
  std::vector<int> start;
  __int128 start_cost = 0;
  if (!sh.best_below(-1, &start, &start_cost) || Clock::now() >= deadline) return;
  // Phase 2: the coarse model exactly (HiGHS, memory rows on demand) when
  // it is small enough for HiGHS; phase 3 (or instead): large-neighbourhood
  // search over regions of groups, with the groups rebuilt as the best
  // improves (a lower UB prunes more and groups more).
  {
    auto cs = groups_for(m, sh, start_cost, deadline);
    if (!cs) return;
    auto [cols, nz] = milp_size(cs->coarse);
    trace("coarse model: %d groups, %zu strategies, %zu edges, MILP %zu columns", cs->coarse.n, cs->coarse.strat.size(),
          cs->coarse.edges.size(), cols);
    if (!sh.done && cols <= static_cast<size_t>(so.whole_coarse_milp_columns)) {
      PhaseTimer timer(sh.ledger, Phase::CoarseMilp);
      CoarseMilpResult cr = coarse_milp_search(
          m, *cs, start, start_cost, milp_phase_end(t_start, deadline, so.milp_tail_share), 1, seed,
          [&](const std::vector<int>& x, __int128 c) { sh.offer(x, c, Phase::CoarseMilp); },
          [&]() { return sh.done.load(); });
      if (cr.optimal) sh.raise_bound(static_cast<long double>(start_cost));
      else if (cr.ran) sh.raise_bound(std::ceil(cr.bound));
      trace("coarse milp: %d rounds, %zu rows, optimal=%d", cr.rounds, cr.rows, (int)cr.optimal);
    }
  }
  if (kick_from_start) kick_worker(m, sh, deadline, seed + 77);
  else lns_worker(m, sh, deadline, seed, &progress);
}

SearchResult finish(Shared& sh) {
  SearchResult r;
  r.labels = sh.labels;
  r.cost = sh.cost;
  r.bound = sh.bound;
  r.reduced_cost = std::move(sh.reduced_cost);
  r.rc_bound = sh.rc_bound;
  r.point_price = std::move(sh.point_price);
  return r;
}

}  // namespace

long double lagrangian_bound(const Model& m, int iterations, __int128 upper) {
  const SearchOptions options;
  Shared sh(options, nullptr);
  if (upper >= 0) sh.found = true, sh.cost = upper;
  bound_search(m, DualSolver::edge_costs(m), sh, Clock::time_point::max(), Clock::time_point::max(),
               static_cast<int>(options.stall_iterations), iterations);
  return sh.bound;
}

SearchResult lagrangian_search(const Model& m, const SolveOptions& opt, Clock::time_point deadline,
                               const std::function<void(const SearchResult&)>& progress, bool allow_lns,
                               PhaseLedger* ledger) {
  Shared sh(opt.search, ledger);
  sh.gap_tolerance = opt.gap_tolerance;
  sh.offset = static_cast<long double>(m.offset);
  sh.good_enough = opt.good_enough_cost;
  auto report = [&]() {
    if (!progress) return;
    SearchResult now;
    {
      std::lock_guard<std::mutex> lock(sh.mu);
      if (!sh.found) return;
      now.cost = sh.cost;
      now.bound = sh.bound;
      now.labels = sh.labels;
    }
    progress(now);
  };
  // A labelling before anything else, so that a search stopped at any
  // moment has a plan: greedy, repaired to fit memory when it does not (that repair has
  // no deadline: it is the plan of a search stopped at once).
  // A start brought under the memory limit (repair, by `repair_by`), then chain moves off
  // what forbidden entries remain, in a tenth of the time left at most: on a 3-D mesh's
  // recompute instance the memory repair between them is slow.
  auto settle = [&](Primal& p, Clock::time_point repair_by) {
    if (!p.memory_ok()) p.repair(repair_by);
    if (trace_on())  // conflicts() reads every edge: only for the trace
      trace("start repaired (memory %s, %d forbidden entries)", p.memory_ok() ? "fits" : "over", p.conflicts());
    if (p.memory_ok() && p.conflicts() > 0) p.clear_conflicts(Clock::now() + (deadline - Clock::now()) / 10);
  };
  bool given_fits = false;  // a feasible start stands in for the greedy one (a folded solve's, planner.cpp)
  bool kick_from_start = false;  // it fills the memory limit: primal_search kicks from it
  if (opt.start != nullptr) {  // the caller's labelling, where the reductions kept its strategies
    PhaseTimer timer(ledger, Phase::Greedy);
    std::vector<int> x = greedy_labels(m);
    for (int i = 0; i < m.n; ++i) {
      const size_t p = static_cast<size_t>(m.orig[static_cast<size_t>(i)]);
      if (p >= opt.start->size()) continue;
      for (size_t k = m.off[i]; k < m.off[i + 1]; ++k)
        if (m.strat[k] == (*opt.start)[p]) x[static_cast<size_t>(i)] = static_cast<int>(k - m.off[i]);
    }
    Primal given(m);
    given.set(x);
    settle(given, Clock::time_point::max());
    if (given.memory_ok()) given.improve(8 * static_cast<size_t>(m.n));  // first moves: off forbidden pairs
    if (given.feasible()) sh.offer(given.labels(), given.cost(), Phase::Greedy);
    given_fits = given.feasible();
    kick_from_start = given_fits && fullest_point(m, given.labels()) >= opt.search.kick_start_fullness;
    trace("given start: %s%s", given.feasible() ? to_string(given.cost()).c_str() : "infeasible",
          kick_from_start ? " (full to kick_start_fullness: kicks, no price phase)" : "");
  }
  if (given_fits) {
    sh.raise_bound(std::floor(separable_bound(m)));
  } else {
    PhaseTimer timer(ledger, Phase::Greedy);
    Primal first(m);
    first.set(greedy_labels(m));
    settle(first, Clock::time_point::max());
    if (first.feasible()) first.improve(8 * static_cast<size_t>(m.n));  // single-node moves, bounded
    // Exact moves on forests of single nodes (memory kept) while they pay
    // and time is left: they change whole trees at once, which single-node
    // moves cannot (a parameter and its consumers switching together).
    if (first.feasible() && Clock::now() < deadline) {
      ForestMoves fine(m);
      std::mt19937_64 rng(opt.seed + 17);
      for (int sw = 0; sw < 4 && Clock::now() < deadline && fine.sweep(first, rng) > 0; ++sw) first.improve();
    }
    if (first.feasible()) sh.offer(first.labels(), first.cost(), Phase::Greedy);
    if (!first.feasible() && !m.cap.empty()) {
      // Memory-bound: the cheap start's repair traded memory for forbidden pairs. Start
      // again from a labelling of least usage (one greedy pass), and move off its forbidden
      // pairs and towards cost from there (70B on 8x8x4: feasible at once, where the cheap
      // start never was).
      Primal lean(m);
      lean.set(greedy_labels(m, /*lean=*/true));
      settle(lean, deadline);
      if (lean.feasible()) lean.improve(8 * static_cast<size_t>(m.n));
      if (lean.feasible()) sh.offer(lean.labels(), lean.cost(), Phase::Greedy);
      if (trace_on())
        trace("lean start: %s (memory %s, %d forbidden entries)",
              lean.feasible() ? to_string(lean.cost()).c_str() : "infeasible", lean.memory_ok() ? "fits" : "over",
              lean.conflicts());
    }
    sh.raise_bound(std::floor(separable_bound(m)));
    if (trace_on())
      trace("greedy start: %s (memory %s, %d forbidden entries)",
            first.feasible() ? to_string(first.cost()).c_str() : "infeasible", first.memory_ok() ? "fits" : "over",
            first.conflicts());
  }
  // A start already good enough (a re-solve repairing a plan, planner.cpp) needs neither
  // side: their set-up alone (edge factoring, the bound's first pass, the coarse model) took
  // 1.2 s on 405B after the repaired start was in hand.
  if (Clock::now() >= deadline || sh.done) return finish(sh);
  // The caller's multipliers on this model's check points: a price at a step goes to the check
  // point of the run of steps it falls in (a run shares its live nodes; reduce.cpp).
  std::vector<double> lam0;
  if (opt.start_prices != nullptr && !m.cap.empty()) {
    lam0.assign(m.cap.size(), 0.0);
    for (const auto& [step, price] : *opt.start_prices) {
      const auto at = std::upper_bound(m.point_time.begin(), m.point_time.end(), step);
      if (at != m.point_time.begin() && price > 0) lam0[static_cast<size_t>(at - m.point_time.begin() - 1)] += price;
    }
  }
  const std::vector<double>* start_lam = lam0.empty() ? nullptr : &lam0;
  if (start_lam != nullptr) {
    // The caller's multipliers stand for the bound search's until it has its own, so priced
    // kicks have prices from the start: on 405B the bound search's first iteration comes
    // seconds into the solve, and with a caller's bound beside it (bound_beside) it may not
    // run at all.
    std::lock_guard<std::mutex> lock(sh.mu);
    sh.memory_price = summed_prices(m, lam0);
    sh.point_price = lam0;
    ++sh.price_version;
  }
  const int max_stall = static_cast<int>(opt.search.stall_iterations);
  const DualSolver::EdgeCosts mat = DualSolver::edge_costs(m);  // one copy for both sides
  if (opt.threads >= 2) {
    std::exception_ptr beside_error;  // bound_beside's, if it threw
    std::thread dual_thread([&] {
      {
        PhaseTimer timer(sh.ledger, Phase::Bound);
        // The bound gets bound_share of the time when kicks may follow, and up to
        // bound_share_max on a slow model (bound_search); this core then searches.
        const auto now = Clock::now();
        auto share_end = [&](double share) {
          return allow_lns ? now + std::chrono::duration_cast<Clock::duration>((deadline - now) * share) : deadline;
        };
        const double most = std::max(opt.search.bound_share, opt.search.bound_share_max);
        if (opt.bound_beside) {  // the caller's bound first, in problem units
          const long double offset = static_cast<long double>(m.offset);
          try {
            const long double best = opt.bound_beside(share_end(most), [&](long double b) {
              sh.raise_bound(std::floor(b - offset));
              return !sh.done.load();
            });
            sh.raise_bound(std::floor(best - offset));  // a caller may report its bound only here
          } catch (...) {  // rethrown to the caller after the join: a thread must not throw
            beside_error = std::current_exception();
            sh.done = true;
            return;
          }
        }
        bound_search(m, mat, sh, share_end(opt.search.bound_share), share_end(most), max_stall,
                     std::numeric_limits<int>::max(), start_lam);
      }
      // Once the bound stalls, this core searches too (without HiGHS:
      // HiGHS sessions cannot overlap, see milp.cpp).
      if (!allow_lns) return;
      while (!sh.done && Clock::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(sh.mu);
          if (sh.found) break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      if (!sh.done && Clock::now() < deadline) kick_worker(m, sh, deadline, opt.seed + 1000003);
    });
    primal_search(m, mat, sh, deadline, max_stall, report, opt.seed, allow_lns, kick_from_start);
    sh.done = true;  // the primal side decides when to stop; the bound so far stands
    dual_thread.join();
    if (beside_error) std::rethrow_exception(beside_error);
  } else {
    auto mid = Clock::now() + (deadline - Clock::now()) * 2 / 3;
    primal_search(m, mat, sh, mid, max_stall, report, opt.seed, allow_lns, kick_from_start);
    PhaseTimer timer(sh.ledger, Phase::Bound);
    bound_search(m, mat, sh, deadline, deadline, max_stall, std::numeric_limits<int>::max(), start_lam);
  }
  return finish(sh);
}

}  // namespace tlm::solver
