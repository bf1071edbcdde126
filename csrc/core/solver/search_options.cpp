#include "core/solver/search_options.h"

#include <cmath>
#include <iterator>
#include <stdexcept>

namespace tlm::solver {

const std::vector<SearchOptionInfo>& search_option_table() {
  using O = SearchOptions;
  static const std::vector<SearchOptionInfo> table = {
      {"reduce_share", &O::reduce_share, 0, 1, false, "share of the limit for dominance checks and eliminations"},
      {"whole_milp_columns", &O::whole_milp_columns, 0, 1e8, true, "reduced models up to this many MILP columns go to HiGHS whole after the search"},
      {"whole_milp_nonzeros", &O::whole_milp_nonzeros, 0, 1e9, true, "... and up to this many nonzeros"},
      {"whole_coarse_milp_columns", &O::whole_coarse_milp_columns, 0, 1e8, true, "grouped models up to this many columns go to HiGHS whole (coarse_milp and merges)"},
      {"milp_tail_share", &O::milp_tail_share, 0, 0.9, false, "last share of the limit no HiGHS phase may use (HiGHS can overrun its own limit)"},
      {"price_share", &O::price_share, 0.01, 1, false, "share of the search time the price phase always gets when exact phases follow"},
      {"price_share_max", &O::price_share_max, 0.01, 1, false, "most of the search time the price phase gets while it keeps improving (past price_share it hands over after price_handover_iterations without improving)"},
      {"stall_iterations", &O::stall_iterations, 1, 1e6, true, "the bound search stops after this many exact-bound checks (every 4th iteration) without a rise, the price phase after this many iterations without a better plan"},
      {"bound_share", &O::bound_share, 0.05, 1, false, "share of the time the bound search always gets on the second core before it turns to kicks"},
      {"bound_share_max", &O::bound_share_max, 0.05, 1, false, "most of the time it gets while it has run fewer than 200 iterations (a slow model's bound is still rising)"},
      {"bound_undo_fall", &O::bound_undo_fall, 0.001, 1, false, "a bound-search step whose Lagrangian falls by more than this fraction of the best is undone (back to the best multipliers, the step scale halved)"},
      {"kick_start_fullness", &O::kick_start_fullness, 0, 2, false, "a given start whose fullest memory check point holds at least this share of its capacity is searched from by kicks, with no price phase (above 1: never)"},
      {"price_handover_iterations", &O::price_handover_iterations, 1, 1e6, true, "the price phase hands over after this many iterations without improving..."},
      {"price_handover_s", &O::price_handover_s, 0, 1e5, false, "... and this many seconds (or half its time to the last improvement)"},
      {"forest_every", &O::forest_every, 1, 1e6, true, "region steps between exact forest sweeps"},
      {"kick_every", &O::kick_every, 1, 1e6, true, "region steps between Lagrangian kicks"},
      {"forest_at", &O::forest_at, 0, 1e6, true, "region step of the first forest sweep (modulo forest_every)"},
      {"kick_at", &O::kick_at, 0, 1e6, true, "region step of the first Lagrangian kick (modulo kick_every)"},
      {"merge_every", &O::merge_every, 1, 1e6, true, "region steps between chances to merge solutions (a merge takes the step of a region)"},
      {"merge_at", &O::merge_at, 0, 1e6, true, "region step of the first chance to merge (modulo merge_every)"},
      {"live_region_every", &O::live_region_every, 1, 1e6, true, "region steps between regions around a tight memory point extended by the groups live there"},
      {"live_region_at", &O::live_region_at, 0, 1e6, true, "region step of the first such region (modulo live_region_every)"},
      {"tight_region_every", &O::tight_region_every, 1, 1e6, true, "region steps between regions grown from a tight memory point (the other steps grow them from a random group)"},
      {"tight_region_at", &O::tight_region_at, 0, 1e6, true, "region step of the first such region (modulo tight_region_every)"},
      {"priced_kick_every", &O::priced_kick_every, 1, 1e6, true, "kick steps per round of Lagrangian kicks on the second core"},
      {"priced_kick_at", &O::priced_kick_at, 0, 1e6, true, "kick step of a round's first Lagrangian kick (modulo priced_kick_every)"},
      {"priced_kick_runs", &O::priced_kick_runs, 1, 1e6, true, "Lagrangian kicks in a row per round (the other kick steps kick without prices)"},
      {"directed_kick_every", &O::directed_kick_every, 1, 1e6, true, "kick steps between directed kicks, among those without prices (the others are random near a tight point)"},
      {"directed_kick_at", &O::directed_kick_at, 0, 1e6, true, "kick step of the first directed kick (modulo directed_kick_every)"},
      {"merge_interval_s", &O::merge_interval_s, 0, 1e5, false, "seconds between solution merges"},
      {"merge_budget_s", &O::merge_budget_s, 0.01, 1e5, false, "HiGHS seconds per merge"},
      {"merge_min_new", &O::merge_min_new, 1, 1e6, true, "new pool members before a merge"},
      {"merge_pool", &O::merge_pool, 1, 1e5, true, "most recent distinct kick results kept for merging"},
      {"region_budget_s", &O::region_budget_s, 0.01, 1e5, false, "HiGHS seconds per region"},
      {"region_columns", &O::region_columns, 100, 1e8, true, "MILP columns of the first regions"},
      {"region_columns_min", &O::region_columns_min, 100, 1e8, true, "regions HiGHS cannot finish shrink to no fewer columns"},
      {"region_columns_max", &O::region_columns_max, 100, 1e8, true, "quick regions grow to no more columns"},
      {"region_groups", &O::region_groups, 1, 1e7, true, "groups per region"},
      {"region_strategies", &O::region_strategies, 2, 1e4, true, "candidate strategies per group in a region"},
  };
  return table;
}

namespace {

void check(const SearchOptionInfo& o, double v) {
  if (!std::isfinite(v) || v < o.lo || v > o.hi)
    throw std::invalid_argument(std::string("solver option ") + o.name + ": expected a number in [" +
                                std::to_string(o.lo) + ", " + std::to_string(o.hi) + "], got " + std::to_string(v));
  if (o.integer && v != std::floor(v))
    throw std::invalid_argument(std::string("solver option ") + o.name + ": expected a whole number, got " +
                                std::to_string(v));
}

}  // namespace

void set_search_option(SearchOptions& options, const std::string& name, double value) {
  std::string names;
  for (const auto& o : search_option_table()) {
    if (name == o.name) {
      check(o, value);
      options.*o.field = value;
      return;
    }
    names += names.empty() ? o.name : std::string(", ") + o.name;
  }
  throw std::invalid_argument("unknown solver option '" + name + "'; expected one of " + names);
}

void validate(const SearchOptions& options) {
  for (const auto& o : search_option_table()) check(o, options.*o.field);
  if (options.region_columns_min > options.region_columns_max)
    throw std::invalid_argument("solver options: region_columns_min must not exceed region_columns_max");
}

const char* phase_name(Phase p) {
  static constexpr const char* names[] = {"reduce", "greedy",          "price", "bound", "coarse_milp", "regions",
                                          "forest", "lagrangian_kick", "kick",  "merge", "final_milp"};
  static_assert(std::size(names) == kPhaseCount, "one name per Phase");
  return names[static_cast<int>(p)];
}

const std::vector<ScheduledStep>& schedule_table() {
  using O = SearchOptions;
  constexpr Worker R = Worker::Regions, K = Worker::Kicks;
  // In each worker's order; the default pacing is the schedule the loops had
  // as literals (step % forest_every == 0, step % kick_every == kick_every / 2,
  // step % 2 == 1, step % 4 == 0, kicks % 3 != 0, kicks % 2 == 1).
  static const std::vector<ScheduledStep> table = {
      {"forest", R, Phase::Forest, false, &O::forest_every, &O::forest_at, nullptr,
       "exact forest moves over all groups (cheap next to a region)"},
      {"lagrangian_kick", R, Phase::LagrangianKick, false, &O::kick_every, &O::kick_at, nullptr,
       "a kick at the bound search's memory prices, once there are prices"},
      {"merge", R, Phase::Merge, true, &O::merge_every, &O::merge_at, nullptr,
       "solution merging, once merge_interval_s passed and the kicks brought merge_min_new labellings"},
      {"live_region", R, Phase::Regions, true, &O::live_region_every, &O::live_region_at, nullptr,
       "a region around a tight memory point, extended by the groups live there (with memory only)"},
      {"tight_region", R, Phase::Regions, true, &O::tight_region_every, &O::tight_region_at, nullptr,
       "a region grown from a group live at a tight memory point (with memory only)"},
      {"region", R, Phase::Regions, true, nullptr, nullptr, nullptr, "a region grown from a random group"},
      {"priced_kick", K, Phase::Kick, true, &O::priced_kick_every, &O::priced_kick_at, &O::priced_kick_runs,
       "a kick at a random scale of the bound search's memory prices, once there are prices"},
      {"directed_kick", K, Phase::Kick, true, &O::directed_kick_every, &O::directed_kick_at, nullptr,
       "a directed kick anywhere (kick.h)"},
      {"near_tight_kick", K, Phase::Kick, true, nullptr, nullptr, nullptr,
       "a random kick centred near a tight memory point (kick.h)"},
  };
  return table;
}

bool due(const SearchOptions& options, const ScheduledStep& step, long s) {
  if (!step.every) return true;
  const long every = static_cast<long>(options.*step.every);
  const long at = step.at ? static_cast<long>(options.*step.at) : 0;
  const long runs = step.runs ? static_cast<long>(options.*step.runs) : 1;
  return ((s - at) % every + every) % every < runs;
}

void run_schedule(const SearchOptions& options, Worker worker, long s,
                  const std::function<bool(const ScheduledStep&)>& run) {
  for (const ScheduledStep& step : schedule_table())
    if (step.worker == worker && due(options, step, s) && run(step) && step.ends_step) return;
}

void PhaseLedger::add_time(Phase p, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  t_[static_cast<int>(p)].seconds += seconds;
  ++t_[static_cast<int>(p)].runs;
}

void PhaseLedger::improved(Phase p, double gain) {
  std::lock_guard<std::mutex> lock(mu_);
  ++t_[static_cast<int>(p)].improvements;
  t_[static_cast<int>(p)].gain += gain;
}

std::vector<PhaseTotal> PhaseLedger::totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PhaseTotal> out;
  for (int i = 0; i < kPhaseCount; ++i) {
    PhaseTotal t = t_[i];
    t.name = phase_name(static_cast<Phase>(i));
    if (t.runs > 0 || t.improvements > 0) out.push_back(t);
  }
  return out;
}

}  // namespace tlm::solver
