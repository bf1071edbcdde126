#include "core/fold_blocks.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>

#include "core/fold_tail.h"
#include "core/solver/fold.h"
#include "core/solver/spend_slack.h"
#include "core/solver/trace.h"
#include "core/symmetry.h"

namespace tlm {

namespace {

using Clock = std::chrono::steady_clock;

// The repeated block each IR step belongs to (-1: none, or a block that is not repeated).
// An untagged step inside the graph (a gradient's accumulation, a parameter's cast) belongs
// to the block of the last tagged step before it; a placeholder only to its own tag.
std::vector<int> step_blocks(const Graph& g, const RepeatedBlocks& rb) {
  std::map<std::string, int> index;
  for (size_t b = 0; b < rb.names.size(); ++b) index[rb.names[b]] = static_cast<int>(b);
  auto block_of = [&](const IrNode& node) {
    const json::Value* b = node.extra.find("block");
    if (b == nullptr || b->is_null()) return -2;  // untagged
    auto it = index.find(b->as_string("extra.block"));
    return it == index.end() ? -1 : it->second;  // -1: a block that is not repeated
  };
  std::vector<int> owner(g.nodes.size(), -1);
  int carried = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const int own = block_of(g.nodes[i]);
    if (g.nodes[i].op == "placeholder") {
      owner[i] = own == -2 ? -1 : own;
    } else {
      if (own != -2) carried = own;
      owner[i] = carried;
    }
  }
  return owner;
}

}  // namespace

std::vector<char> kept_steps(const std::vector<int>& step_block, int tied) {
  std::vector<char> keep(step_block.size(), 1);
  for (size_t i = 0; i < step_block.size(); ++i) {
    const int b = step_block[i];
    keep[i] = b < 0 || b == 0 || b >= tied - 1;
  }
  return keep;
}

std::optional<FoldedStart> solve_folded(const Graph& g, const CostTables& t, const solver::SolveOptions& so,
                                        double time_limit_s, bool plan_is_folded) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(std::max(0.0, time_limit_s)));
  // The last slices of the time go to untying the plan: its last blocks when no full solve
  // follows (fold_tail.h), then single members (solver/spend_slack.h).
  const double tail_seconds = plan_is_folded ? fold_tail_seconds(time_limit_s) : 0;
  const auto untie_start = deadline - std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(spend_slack_seconds(time_limit_s)));
  const auto solve_end = untie_start - std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(tail_seconds));
  const RepeatedBlocks rb = find_repeated_blocks(g, t);
  if (static_cast<int>(rb.members.size()) < kFoldMinBlocks) return std::nullopt;
  std::vector<std::vector<int>> classes(rb.members.front().size());
  for (const std::vector<int>& block : rb.members)
    for (size_t k = 0; k < block.size(); ++k) classes[k].push_back(block[k]);
  const std::vector<int> owner = step_blocks(g, rb);
  std::vector<char> keep = kept_steps(owner, static_cast<int>(rb.names.size()));
  const solver::Problem& full = t.problem;
  std::optional<FoldedStart> out;
  for (int round = 0; round < 3; ++round) {
    const double left = std::chrono::duration<double>(solve_end - Clock::now()).count();
    if (left <= 0) break;
    std::string why;
    std::optional<solver::Folding> f = solver::fold_problem(full, classes, keep, &why);
    if (!f) {
      solver::trace("fold: the repeated blocks cannot be tied (%s)", why.c_str());
      return out;
    }
    solver::SolveOptions fo = so;
    fo.time_limit_s = left;
    fo.start = nullptr;
    fo.on_progress = nullptr;
    // Its bound search's best multipliers start the block bound (solver/block_bound.h), so a
    // collapse there costs the plan's gap: one step on 405B's folded problem took the bound
    // from 17.13e12 to 14.4e12 and later to 11.4e12 (a fall the default rule, half the
    // best, lets stand), and the fold ended at a 12.9-14.1% gap where others end at 6.5-7.8%.
    fo.search.bound_undo_fall = kFoldBoundUndoFall;
    // Its multipliers start the block bound too, which gains more from them than the fold's
    // plan gains from kicks on that core (search_options.h, bound_share_max).
    // Both shares: past bound_share the search stops after 200 iterations, which SIMD passes
    // (min_plus.h) reach at 8.6 s of 405B's 12.5 s fold.
    fo.search.bound_share = fo.search.bound_share_max = kFoldBoundShareMax;
    solver::SolveResult r;
    try {
      r = solver::solve(f->problem, fo);
    } catch (const solver::InfeasibleError& e) {  // tied, nothing fits: the full solve says why or finds one
      solver::trace("fold: no tied labelling fits (%s)", e.what());
      return out;
    } catch (const std::runtime_error& e) {  // no labelling in the time
      solver::trace("fold: %s", e.what());
      return out;
    }
    FoldedStart s;
    s.blocks = static_cast<int>(rb.members.size());
    s.block_nodes = rb.members;
    s.kept_steps = keep;
    s.step_block = owner;
    s.milp_note = r.milp_note;
    s.labels = solver::unfold(*f, r.solution);
    const solver::Evaluation ev = solver::evaluate(full, s.labels);
    s.fits = ev.feasible;
    s.cost = ev.cost;
    for (const auto& [folded_step, price] : r.step_prices)
      if (folded_step >= 0) s.step_prices.emplace_back(f->full_step(folded_step), price);
    char note[240];
    std::snprintf(note, sizeof note,
                  "%d blocks folded: %zu -> %zu nodes (%d shadows), %zu of %zu memory steps; tied plan %s "
                  "(folded gap %.2f%%, %.2f s)%s",
                  s.blocks, full.nodes.size(), f->problem.nodes.size(), f->shadows, f->kept_steps, keep.size(),
                  solver::to_string(ev.cost).c_str(), 100 * r.gap, r.seconds, ev.feasible ? "" : ", over the limit");
    s.note = note;
    solver::trace("fold: round %d: %s", round + 1, note);
    out = std::move(s);
    if (ev.feasible || !full.usage_limit) break;
    // Keep every step the unfolded plan is over the limit at, and fold again.
    const std::vector<__int128> load = solver::load_by_step(full, out->labels, keep.size());
    bool grew = false;
    for (size_t step = 0; step < keep.size(); ++step)
      if (load[step] > *full.usage_limit && !keep[step]) keep[step] = 1, grew = true;
    if (!grew) break;  // over at kept steps only: a forbidden pair or a limit the folding cannot see
  }
  if (out && out->fits && tail_seconds > 0) {
    // Its slice at most: a fold that ended early (at its gap tolerance) leaves it more.
    const auto tail_end = std::min(untie_start, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                                 std::chrono::duration<double>(tail_seconds)));
    const TailResult tail = untie_tail(full, rb.members, owner, so, out->labels, out->cost, out->step_prices, tail_end);
    if (tail.improved) out->note += "; " + tail.note;
  }
  if (out && out->fits) {
    // Members untied where the tied plan leaves memory unused; the tied labelling stays the
    // answer should the result not check out on the full problem.
    const auto t0 = Clock::now();
    solver::Solution untied = out->labels;
    const solver::SlackResult sr = solver::spend_slack(full, classes, untied, std::max(deadline, t0));
    const solver::Evaluation ev = sr.moves > 0 ? solver::evaluate(full, untied) : solver::Evaluation{};
    char note[200];
    std::snprintf(note, sizeof note, "; %d members untied into unused memory: %s (%.2f s)", sr.moves,
                  solver::to_string(sr.moves > 0 ? ev.cost : out->cost).c_str(),
                  std::chrono::duration<double>(Clock::now() - t0).count());
    solver::trace("fold: %s, %d candidates", note + 2, sr.candidates);
    if (sr.moves > 0 && ev.feasible && ev.cost < out->cost) {
      out->labels = std::move(untied);
      out->cost = ev.cost;
      out->note += note;
    }
  }
  return out;
}

}  // namespace tlm
