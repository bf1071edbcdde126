#include "core/solver/search_options.h"

#include <cmath>
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
      {"stall_iterations", &O::stall_iterations, 1, 1e6, true, "message passing stops after this many iterations without progress"},
      {"bound_share", &O::bound_share, 0.05, 1, false, "most of the time the bound search gets on the second core before it turns to kicks"},
      {"price_handover_iterations", &O::price_handover_iterations, 1, 1e6, true, "the price phase hands over after this many iterations without improving..."},
      {"price_handover_s", &O::price_handover_s, 0, 1e5, false, "... and this many seconds (or half its time to the last improvement)"},
      {"forest_every", &O::forest_every, 1, 1e6, true, "region steps between exact forest sweeps"},
      {"kick_every", &O::kick_every, 1, 1e6, true, "region steps between Lagrangian kicks"},
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
  static const char* names[kPhaseCount] = {"reduce", "greedy",          "price", "bound", "coarse_milp", "regions",
                                           "forest", "lagrangian_kick", "kick",  "merge", "final_milp"};
  return names[static_cast<int>(p)];
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
