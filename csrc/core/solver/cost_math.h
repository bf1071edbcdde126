// Saturating cost arithmetic shared by the reductions and the search.
// kInfiniteCost stays infinite; finite sums are clamped just below it, so a
// huge-but-allowed choice never turns into a forbidden one.
#pragma once

#include "core/solver/problem.h"

namespace tlm::solver {

constexpr Cost kHugeCost = kInfiniteCost - 1;

inline Cost sat_add(Cost a, Cost b) {
  if (a == kInfiniteCost || b == kInfiniteCost) return kInfiniteCost;
  __int128 s = static_cast<__int128>(a) + b;
  if (s > kHugeCost) return kHugeCost;
  if (s < -kHugeCost) return -kHugeCost;
  return static_cast<Cost>(s);
}

}  // namespace tlm::solver
