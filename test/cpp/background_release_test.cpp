#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "core/background_release.h"
#include "core/plan_json.h"
#include "core/planner.h"
#include "planner_test_util.h"

using namespace tlm;

namespace {

// Records that it was destroyed, and on which thread.
struct Witness {
  Witness(std::atomic<bool>* d, std::thread::id* o) : destroyed(d), on(o) {}
  Witness(const Witness&) = delete;
  std::atomic<bool>* destroyed;
  std::thread::id* on;
  ~Witness() {
    *on = std::this_thread::get_id();
    destroyed->store(true);
  }
};

}  // namespace

TEST(BackgroundRelease, FreesOnAnotherThreadAndTheNextReleaseWaitsForIt) {
  std::atomic<bool> first{false}, second{false};
  std::thread::id first_on, second_on;
  release_in_background(std::make_shared<Witness>(&first, &first_on));
  // A release waits for the one before it: the first is freed once the second is handed over.
  release_in_background(std::make_shared<Witness>(&second, &second_on));
  EXPECT_TRUE(first.load());
  EXPECT_NE(first_on, std::this_thread::get_id());
  release_in_background(nullptr);  // nothing to free: the second may still be running
  release_in_background(std::make_shared<int>(0));
  EXPECT_TRUE(second.load());
  EXPECT_NE(second_on, std::this_thread::get_id());
}

TEST(BackgroundRelease, APlanOutlivesTheTablesItWasMadeFrom) {
  Graph g = read_graph(tlm_test::training_graph(8192, "[4]"));
  std::shared_ptr<void> working;
  Plan plan = plan_graph(g, PlanOptions{}, &working);
  ASSERT_NE(working, nullptr);  // handed over, not freed
  const std::string before = plan_to_json(plan).dump();
  working.reset();  // the tables and strategies go; the plan reads none of them
  EXPECT_EQ(plan_to_json(plan).dump(), before);
}
