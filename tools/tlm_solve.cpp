// Developer driver for the torch-free solver: reads a problem file (our JSON
// or IOPDDL, uncompressed), solves it and prints progress and the result.
// Built by CMake (`tlm_solve`), so solver changes can be tried in seconds
// without rebuilding the Python extension.
//   tlm_solve FILE [time_limit_s] [threads] [seed] [nomem]
// `nomem` solves without the usage limit and reports how far that solution
// is over it (how much the memory constraint matters on an instance).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "core/solver/highs_api.h"
#include "core/solver/problem_io.h"
#include "core/solver/solver.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [time_limit_s] [threads] [seed]\n", argv[0]);
    return 2;
  }
  using namespace tlm::solver;
  auto t0 = std::chrono::steady_clock::now();
#ifdef TLM_HIGHSPY_DIR
  set_highs_library(TLM_HIGHSPY_DIR);  // the highspy CMake found; TLM_HIGHS_LIBRARY overrides it
#endif
  const HighsStatus highs = highs_status();
  if (highs.loaded) std::printf("HiGHS %s from %s\n", highs.version.c_str(), highs.path.c_str());
  else std::printf("%s: %s\n", kHighsUnavailable, highs.why.c_str());
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  Problem p = read_problem(ss.str());
  double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %zu nodes, %zu edges, read in %.1fs\n", p.name.c_str(), p.nodes.size(), p.edges.size(), read_s);
  SolveOptions o;
  o.time_limit_s = argc > 2 ? std::atof(argv[2]) : 10.0;
  o.threads = argc > 3 ? std::atoi(argv[3]) : 2;
  o.seed = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 0;
  o.on_progress = [](double s, __int128 c, double b) {
    std::printf("  [%6.1fs] cost=%s bound=%.0f\n", s, to_string(c).c_str(), b);
    std::fflush(stdout);
  };
  const bool nomem = argc > 5 && std::string(argv[5]) == "nomem";
  Problem q = p;
  if (nomem) q.usage_limit.reset();
  SolveResult r = solve(q, o);
  if (nomem && p.usage_limit) {
    Evaluation ev = evaluate(p, r.solution);
    std::printf("without the limit: peak usage %lld at t=%lld, limit %lld (%.3fx)\n", (long long)ev.peak_usage,
                (long long)ev.peak_time, (long long)*p.usage_limit, (double)ev.peak_usage / (double)*p.usage_limit);
  }
  std::printf("cost=%s bound=%.0f gap=%.2f%% time=%.1f status=%s\n", to_string(r.cost).c_str(), r.bound,
              100.0 * r.gap, r.seconds, r.status.c_str());
  return 0;
}
