// Kicks for iterated local search on groups (coarsen.h).
//
// A kick moves a small connected set of groups away from the current
// labelling, repairs memory by whole groups and re-optimises with exact
// forest moves (forest.h). Random kicks send groups to random strategies.
// Directed kicks send each group to its cheapest strategy given its
// neighbours with memory ignored: on memory-bound problems the local optimum
// is fenced in by the limit, and the repair then frees that memory wherever
// it costs least per byte, which a single-group move cannot do.
#pragma once

#include <random>

#include "coarse_lns.h"
#include "coarsen.h"
#include "forest.h"
#include "model.h"
#include "primal.h"

namespace tlm::solver {

// Kicks `primal` from its labelling. True when the result is feasible (its
// cost may be higher); false when nothing moved or memory could not be
// repaired, and `primal` then holds a labelling to discard. `near_tight`
// centres the kick on a group live at one of the tightest memory points.
bool kick(const Model& m, const Coarsening& cs, ForestMoves& moves, const CoarseLns& regions, Primal& primal,
          std::mt19937_64& rng, bool directed, bool near_tight);

}  // namespace tlm::solver
