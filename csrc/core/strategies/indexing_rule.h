// The one rule shape both indexing files register (indexing.cpp: along one
// dim; advanced_indexing.cpp: index tensors): family "indexing", placements
// per mesh dim from `dims`, the engine's defaults for everything else.
#pragma once

#include <utility>

#include "core/strategies/rule.h"

namespace tlm::strategies::indexing {

inline Rule make(DimsFn dims) {
  Rule r;
  r.family = "indexing";
  r.dims = std::move(dims);
  return r;
}

}  // namespace tlm::strategies::indexing
