// Every tunable of the solver's schedule in one place, with its meaning,
// default and bounds (the way HiGHS lists its options), and the ledger of
// time and improvements per named phase that the schedule produces.
//
// The phases, in the order a solve runs them (solver.cpp, search.cpp):
//   reduce          optimum-preserving reductions (reduce.cpp)
//   greedy          one-pass first labelling (greedy_start.h)
//   price           price-guided message passing, decoded labellings repaired
//   bound           Lagrangian message passing for the lower bound (dual.h)
//   coarse_milp     the grouped model whole in HiGHS when it is small enough
//   regions         large-neighbourhood search: regions of groups re-solved exactly
//   forest          exact forest moves over all groups
//   lagrangian_kick kicks at the bound search's memory prices
//   kick            random and directed kicks (kick.h) on the second core
//   merge           solution merging over a pool of kick results (merge.h)
//   final_milp      the reduced model whole in HiGHS (small models, exact mode)
// The time-shared phases get their shares as options (reduce_share,
// price_share, bound_share, milp_tail_share); the step-paced ones, in the
// two workers' loops, are entries of schedule_table() with their pacing.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tlm::solver {

// The defaults. Each option's meaning, bounds and whether it is a whole number
// are written once, in its row of search_option_table() (search_options.cpp);
// `solve --list-options` and solver_options() print that table.
struct SearchOptions {
  double reduce_share = 0.10;
  double whole_milp_columns = 150000;
  double whole_milp_nonzeros = 1500000;
  double whole_coarse_milp_columns = 150000;
  double milp_tail_share = 0.15;
  double price_share = 0.30;
  double price_share_max = 0.85;
  double stall_iterations = 400;
  double bound_share = 0.5;
  double bound_share_max = 0.7;
  double bound_undo_fall = 0.5;
  double kick_start_fullness = 0.95;
  double price_handover_iterations = 100;
  double price_handover_s = 3;
  double forest_every = 8;
  double kick_every = 4;
  // The pacing of the workers' steps (schedule_table()).
  double forest_at = 0;
  double kick_at = 2;
  double merge_every = 4;
  double merge_at = 0;
  double live_region_every = 2;
  double live_region_at = 1;
  double tight_region_every = 4;
  double tight_region_at = 0;
  double priced_kick_every = 3;
  double priced_kick_at = 1;
  double priced_kick_runs = 2;
  double directed_kick_every = 2;
  double directed_kick_at = 1;
  double merge_interval_s = 3;
  double merge_budget_s = 10;
  double merge_min_new = 4;
  double merge_pool = 48;
  double region_budget_s = 2;
  double region_columns = 30000;
  double region_columns_min = 2000;
  double region_columns_max = 200000;
  double region_groups = 200;
  double region_strategies = 12;
};

struct SearchOptionInfo {
  const char* name;
  double SearchOptions::*field;
  double lo, hi;
  bool integer;
  const char* meaning;
};

// The table of every option (name, field, bounds, whole number or not, meaning).
const std::vector<SearchOptionInfo>& search_option_table();
// Sets one option by name; throws std::invalid_argument naming the option and
// what was expected (unknown name, out of bounds, not a whole number).
void set_search_option(SearchOptions& options, const std::string& name, double value);
// Checks every option against its bounds (std::invalid_argument).
void validate(const SearchOptions& options);

// The ledger's phases (their names: phase_name); Count stays last.
enum class Phase { Reduce, Greedy, Price, Bound, CoarseMilp, Regions, Forest, LagrangianKick, Kick, Merge, FinalMilp, Count };
constexpr int kPhaseCount = static_cast<int>(Phase::Count);
const char* phase_name(Phase p);

// The loops that run their phases step by step (search.cpp).
enum class Worker {
  Regions,  // lns_worker: large-neighbourhood search, one region a step
  Kicks,    // kick_worker: one kick a step, on the core the bound search leaves
};

// One step of a worker's schedule. At each loop step a worker goes through
// its steps in table order and runs those due (s - at) mod every < runs;
// a step that ran and `ends_step` ends the loop step. A step without `every`
// is due at every loop step (a worker's last one, taken when no other is).
// Its function (search.cpp) reports whether it ran (a due step can decline,
// e.g. a priced kick before there are prices).
struct ScheduledStep {
  const char* name;
  Worker worker;
  Phase phase;  // where the ledger counts its time and improvements
  bool ends_step;
  double SearchOptions::*every;  // null: every loop step
  double SearchOptions::*at;     // null: 0
  double SearchOptions::*runs;   // null: 1
  const char* meaning;
};

// The workers' schedules in order. A new paced phase: one entry here, its
// pacing options above, and its function in search.cpp.
const std::vector<ScheduledStep>& schedule_table();
// Whether `step` is due at loop step `s` under `options`.
bool due(const SearchOptions& options, const ScheduledStep& step, long s);
// One loop step of `worker`: its due steps in order through `run` (true when
// the step ran), until one that ran ends the loop step.
void run_schedule(const SearchOptions& options, Worker worker, long s,
                  const std::function<bool(const ScheduledStep&)>& run);

struct PhaseTotal {
  std::string name;
  double seconds = 0;   // thread-seconds spent in the phase
  int runs = 0;         // times it ran
  int improvements = 0; // new best labellings it found
  double gain = 0;      // total cost those improvements removed (the first labelling counts in full)
};

// Thread-safe totals per phase.
class PhaseLedger {
 public:
  void add_time(Phase p, double seconds);
  void improved(Phase p, double gain);
  std::vector<PhaseTotal> totals() const;

 private:
  mutable std::mutex mu_;
  std::array<PhaseTotal, kPhaseCount> t_{};
};

// Charges the time from construction to destruction to a phase (no ledger: nothing).
class PhaseTimer {
 public:
  PhaseTimer(PhaseLedger* ledger, Phase phase)
      : ledger_(ledger), phase_(phase), t0_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    if (ledger_)
      ledger_->add_time(phase_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  PhaseLedger* ledger_;
  Phase phase_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tlm::solver
