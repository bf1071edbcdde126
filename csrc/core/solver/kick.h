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

#include "core/solver/coarse_lns.h"
#include "core/solver/coarsen.h"
#include "core/solver/forest.h"
#include "core/solver/model.h"
#include "core/solver/primal.h"

namespace tlm::solver {

// Kicks `primal` from its labelling. True when the result is feasible (its
// cost may be higher); false when nothing moved or memory could not be
// repaired, and `primal` then holds a labelling to discard. `near_tight`
// centres the kick on a group live at one of the tightest memory points.
// The re-optimisation stops its sweeps at `deadline` (one sweep takes a
// tenth of a second on 3-D meshes, and a kick runs up to five).
bool kick(const Model& m, const Coarsening& cs, ForestMoves& moves, const CoarseLns& regions, Primal& primal,
          std::mt19937_64& rng, bool directed, bool near_tight, Clock::time_point deadline);

// A Lagrangian kick: one forest sweep over all groups minimising
// cost + price * usage with the memory limit ignored (each forest accepted
// when that priced objective falls), then the group repair and the usual
// re-optimisation. `price` (per model node) is a memory price such as the
// bound search's multipliers summed over a node's live points; it moves
// many groups at once, wherever memory is dear or cheap, which trades
// memory between groups far apart in the graph. Same result contract as kick().
bool priced_kick(const Model& m, ForestMoves& moves, Primal& primal, const std::vector<double>& price,
                 std::mt19937_64& rng, Clock::time_point deadline);

}  // namespace tlm::solver
