#include "core/solver/kick.h"

#include <cstdint>
#include <optional>

#include "core/solver/cost_math.h"

namespace tlm::solver {
namespace {

// After a kick: memory repair by groups (then by nodes), single-node moves
// and a few exact forest sweeps (none past the deadline).
bool settle(ForestMoves& moves, Primal& primal, std::mt19937_64& rng, Clock::time_point deadline) {
  if (!primal.memory_ok() && !moves.repair(primal) && !primal.repair(deadline)) return false;
  primal.improve();
  for (int sw = 0; sw < 4 && Clock::now() < deadline && moves.sweep(primal, rng) > 0; ++sw) primal.improve();
  return primal.feasible();
}

}  // namespace

bool kick(const Model& m, const Coarsening& cs, ForestMoves& moves, const CoarseLns& regions, Primal& primal,
          std::mt19937_64& rng, bool directed, bool near_tight, Clock::time_point deadline) {
  CoarseLnsOptions ko;
  ko.region_groups = directed ? 1 + static_cast<int>(rng() % 3) : 2 + static_cast<int>(rng() % 11);
  ko.region_columns = SIZE_MAX;
  const int center = !m.cap.empty() && near_tight ? regions.tight_center(primal, rng)
                                                   : static_cast<int>(rng() % cs.coarse.n);
  bool kicked = false;
  for (int g : regions.region_from(center, primal, ko)) {
    const int cur = cs.label_of(g, primal.labels());
    int r = static_cast<int>(rng() % cs.coarse.num_strategies(g));
    if (directed) {
      __int128 best_d = 0;
      r = -1;
      for (int t = 0; t < cs.coarse.num_strategies(g); ++t) {
        if (t == cur || cs.coarse.cost[cs.coarse.off[g] + t] >= kHugeCost) continue;
        const std::optional<__int128> d = moves.group_delta(primal.labels(), g, cur, t);
        if (d && *d < best_d) best_d = *d, r = t;
      }
      if (r < 0) continue;
    }
    if (r != cur && cs.coarse.cost[cs.coarse.off[g] + r] < kHugeCost) moves.move_group(primal, g, r, nullptr), kicked = true;
  }
  if (!kicked) return false;
  return settle(moves, primal, rng, deadline);
}

bool priced_kick(const Model& m, ForestMoves& moves, Primal& primal, const std::vector<double>& price,
                 std::mt19937_64& rng, Clock::time_point deadline) {
  if (m.cap.empty() || moves.sweep(primal, rng, &price, false) == 0) return false;
  return settle(moves, primal, rng, deadline);
}

}  // namespace tlm::solver
