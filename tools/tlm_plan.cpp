// Developer driver for the planner without Python: reads an exported IR file
// (what `torch_localmap.ir.export` writes), plans it with the options JSON
// (what `plan_options` writes; train mode and a 10 s limit by default) and
// prints where the time went and the result. Built by CMake (`tlm_plan`).
//   tlm_plan IR.json [time_limit_s] [options.json]
// With TLM_SOLVER_TRACE set, the table build and the solver print their phases.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "core/graph.h"
#include "core/json.h"
#include "core/plan_json.h"
#include "core/planner.h"
#include "core/solver/highs_api.h"

namespace {
std::string slurp(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", path);
    std::exit(2);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s IR.json [time_limit_s] [options.json]\n", argv[0]);
    return 2;
  }
#ifdef TLM_HIGHSPY_DIR
  tlm::solver::set_highs_library(TLM_HIGHSPY_DIR);
#endif
  const auto t_read = std::chrono::steady_clock::now();
  const tlm::Graph g = tlm::read_graph(slurp(argv[1]));
  const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_read).count();
  tlm::PlanOptions o = argc > 3 ? tlm::read_plan_options(tlm::json::parse(slurp(argv[3]))) : tlm::PlanOptions{};
  if (argc > 2) o.time_limit_s = std::atof(argv[2]);
  o.elapsed_before_s = read_s;
  const auto t0 = std::chrono::steady_clock::now();
  const tlm::Plan plan = tlm::plan_graph(g, o);
  const double wall = read_s + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto t_json = std::chrono::steady_clock::now();
  const size_t json_bytes = tlm::plan_to_json(plan).dump().size();
  const double json_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_json).count();
  const auto& s = plan.summary;
  for (const auto& p : s.solver_progress) std::printf("  [%6.2fs] cost=%.6f bound=%.6f\n", p.seconds, p.cost, p.bound);
  std::printf("plan %.2fs with reading %.2fs (limit %.1fs): tables %.2fs, solve %.2fs, %s, gap %.3f%%; plan JSON %.2fs (%zu bytes)\n",
              wall, read_s, o.time_limit_s, s.build_seconds, s.solver.seconds, s.solver.status.c_str(), 100 * s.solver.gap,
              json_s, json_bytes);
  return 0;
}
