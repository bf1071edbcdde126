#include "core/fold_tail.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>

#include "core/fold_blocks.h"
#include "core/solver/fold.h"
#include "core/solver/trace.h"

namespace tlm {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

TailResult untie_tail(const solver::Problem& full, const std::vector<std::vector<int>>& blocks,
                      const std::vector<int>& step_block, const solver::SolveOptions& so, solver::Solution& x,
                      __int128& cost, const std::vector<std::pair<int64_t, double>>& step_prices,
                      Clock::time_point until) {
  TailResult out;
  const int n = static_cast<int>(blocks.size());
  // The tied head keeps two blocks at least (a class has two members).
  const int tail = std::min(kTailBlocks, n - 2);
  if (tail < 1 || !full.usage_limit) return out;
  const auto t0 = Clock::now();
  const int head = n - tail;  // blocks [0, head) stay tied; each of [head, n) is free
  const size_t width = blocks.front().size();
  std::vector<std::vector<int>> classes(width);
  for (int b = 0; b < head; ++b)
    for (size_t k = 0; k < width; ++k) classes[k].push_back(blocks[b][k]);
  std::string why;
  std::optional<solver::Folding> f = solver::fold_problem(full, classes, kept_steps(step_block, head), &why);
  if (!f) return out;
  // The plan in the new folding's terms, the head as its first block (members untied by
  // spend_slack.h go back to it; the result is kept only if cheaper than `x`), a shadow as
  // its class. The head keeps its labelling: pinned, the reductions fix its nodes and the
  // search moves only the tail's and those outside the blocks.
  solver::Solution start(f->problem.nodes.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) start[static_cast<size_t>(f->node_of[i])] = x[i];
  for (int v : blocks.front()) {
    const size_t c = static_cast<size_t>(f->node_of[static_cast<size_t>(v)]);
    start[c] = f->problem.nodes[c].pinned = x[static_cast<size_t>(v)];
  }
  for (const solver::Coupling& c : f->problem.couplings)
    start[static_cast<size_t>(c.v)] = c.map[static_cast<size_t>(start[static_cast<size_t>(c.u)])];
  solver::SolveOptions fo = so;
  fo.time_limit_s = std::chrono::duration<double>(until - Clock::now()).count();
  if (fo.time_limit_s <= 0) return out;
  fo.start = &start;
  fo.on_progress = nullptr;
  fo.bound_beside = nullptr;
  // Kicks from the start, whatever its fill: the price phase's cold prices decode
  // labellings far from a start this good (search.cpp, primal_search).
  fo.search.kick_start_fullness = 0;
  // The first fold's memory prices at the steps this folding keeps (all of those it kept),
  // so that priced kicks have prices at once; and the least bound search there is: this
  // solve's bound is not wanted (the caller certifies the plan on the full problem).
  std::vector<std::pair<int64_t, double>> prices;
  for (const auto& [step, price] : step_prices) {
    const auto at = std::lower_bound(f->step.begin(), f->step.end(), step);
    if (at != f->step.end() && *at == step) prices.emplace_back(at - f->step.begin(), price);
  }
  fo.start_prices = &prices;
  fo.search.bound_share = fo.search.bound_share_max = 0.05;
  solver::SolveResult r;
  try {
    r = solver::solve(f->problem, fo);
  } catch (const std::exception& e) {  // no labelling in the time: the tied plan stays
    solver::trace("fold tail: %s", e.what());
    return out;
  }
  solver::Solution y = solver::unfold(*f, r.solution);
  const solver::Evaluation ev = solver::evaluate(full, y);
  if (!ev.feasible || ev.cost >= cost) {
    solver::trace("fold tail: last %d blocks re-solved with the others held: no better plan (%.2f s)", tail,
                  std::chrono::duration<double>(Clock::now() - t0).count());
    return out;
  }
  const __int128 tied = cost;
  x = std::move(y);
  cost = ev.cost;
  out.improved = true;
  // The copies: the tail's first block (an inner one) to the blocks before it.
  const std::vector<int>& model = blocks[static_cast<size_t>(head)];
  for (int b = head - 1; b >= 0 && Clock::now() < until; --b) {
    solver::Solution z = x;
    for (size_t k = 0; k < width; ++k)
      z[static_cast<size_t>(blocks[b][k])] = x[static_cast<size_t>(model[k])];
    const solver::Evaluation e = solver::evaluate(full, z);
    if (!e.feasible || e.cost >= cost) break;
    x = std::move(z);
    cost = e.cost;
    ++out.copied;
  }
  char note[200];
  std::snprintf(note, sizeof note, "last %d blocks re-solved with the others held, copied to %d before them: %s -> %s (%.2f s)",
                tail, out.copied, solver::to_string(tied).c_str(), solver::to_string(cost).c_str(),
                std::chrono::duration<double>(Clock::now() - t0).count());
  out.note = note;
  solver::trace("fold tail: %s", note);
  return out;
}

}  // namespace tlm
