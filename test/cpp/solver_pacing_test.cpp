// The workers' schedule as data (schedule_table): with the default options
// it runs the steps the loops used to pace with literals, in the same order,
// and its pacing options reach it through the option table.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/solver/search_options.h"

namespace tlm::solver {
namespace {

// The steps one loop step runs; `declines` are steps that cannot run now
// (no memory points, no prices yet, nothing new to merge).
std::vector<std::string> steps_run(const SearchOptions& o, Worker w, long s, const std::set<std::string>& declines) {
  std::vector<std::string> ran;
  run_schedule(o, w, s, [&](const ScheduledStep& st) {
    if (declines.count(st.name)) return false;
    ran.push_back(st.name);
    return true;
  });
  return ran;
}

// lns_worker's loop as it was written with literals, for the same situation.
std::vector<std::string> old_region_step(long s, bool memory, bool prices, bool merge_ready) {
  std::vector<std::string> ran;
  if (s % 8 == 0) ran.push_back("forest");
  if (s % 4 == 4 / 2 && prices) ran.push_back("lagrangian_kick");
  if (s % 4 == 0 && merge_ready) {
    ran.push_back("merge");
    return ran;
  }
  if (memory && s % 2 == 1) ran.push_back("live_region");
  else if (memory && s % 4 == 0) ran.push_back("tight_region");
  else ran.push_back("region");
  return ran;
}

// kick_worker's loop as it was written with literals.
std::string old_kick_step(long s, bool prices) {
  if (s % 3 != 0 && prices) return "priced_kick";
  return s % 2 == 1 ? "directed_kick" : "near_tight_kick";
}

TEST(SolverSchedule, DefaultsRunTheStepsTheLiteralLoopsRan) {
  const SearchOptions o;
  for (bool memory : {true, false})
    for (bool prices : {true, false})
      for (bool merge_ready : {true, false}) {
        std::set<std::string> declines;
        if (!memory) declines.insert({"live_region", "tight_region"});
        if (!prices) declines.insert("lagrangian_kick");
        if (!merge_ready) declines.insert("merge");
        for (long s = 0; s < 96; ++s)
          EXPECT_EQ(steps_run(o, Worker::Regions, s, declines), old_region_step(s, memory, prices, merge_ready))
              << "region step " << s << " memory " << memory << " prices " << prices << " merge " << merge_ready;
      }
  for (bool prices : {true, false})
    for (long s = 0; s < 96; ++s)
      EXPECT_EQ(steps_run(o, Worker::Kicks, s, prices ? std::set<std::string>{} : std::set<std::string>{"priced_kick"}),
                std::vector<std::string>{old_kick_step(s, prices)})
          << "kick step " << s << " prices " << prices;
}

TEST(SolverSchedule, PacingOptionsAreInTheOptionTableAndMoveTheSteps) {
  SearchOptions o;
  set_search_option(o, "forest_every", 3);
  set_search_option(o, "forest_at", 1);
  EXPECT_EQ(steps_run(o, Worker::Regions, 4, {"lagrangian_kick", "merge"}),
            (std::vector<std::string>{"forest", "tight_region"}));
  EXPECT_EQ(steps_run(o, Worker::Regions, 8, {"lagrangian_kick", "merge"}), (std::vector<std::string>{"tight_region"}));
  set_search_option(o, "priced_kick_runs", 3);  // runs >= every: every kick is priced
  for (long s = 0; s < 6; ++s)
    EXPECT_EQ(steps_run(o, Worker::Kicks, s, {}), std::vector<std::string>{"priced_kick"}) << s;
  EXPECT_THROW(set_search_option(o, "merge_every", 0), std::invalid_argument);
  EXPECT_THROW(set_search_option(o, "kick_at", 0.5), std::invalid_argument);
}

// Every step's pacing options are options (so Python and the CLI list them),
// each worker ends with a step due at every loop step (so each loop step runs
// one region or one kick), and each step counts under a named ledger phase.
TEST(SolverSchedule, EveryStepIsPacedByListedOptionsAndEachWorkerHasAFallback) {
  auto listed = [](double SearchOptions::*field) {
    for (const auto& o : search_option_table())
      if (o.field == field) return true;
    return false;
  };
  for (Worker w : {Worker::Regions, Worker::Kicks}) {
    const ScheduledStep* last = nullptr;
    for (const ScheduledStep& s : schedule_table()) {
      if (s.worker != w) continue;
      last = &s;
      for (auto field : {s.every, s.at, s.runs})
        if (field) EXPECT_TRUE(listed(field)) << s.name << ": a pacing field missing from the option table";
      EXPECT_FALSE(std::string(phase_name(s.phase)).empty()) << s.name;
      EXPECT_FALSE(std::string(s.meaning).empty()) << s.name;
    }
    ASSERT_NE(last, nullptr);
    EXPECT_TRUE(last->every == nullptr) << last->name << ": a worker's last step must be due at every loop step";
    EXPECT_TRUE(last->ends_step) << last->name;
  }
}

}  // namespace
}  // namespace tlm::solver
