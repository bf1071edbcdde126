// Edge matrices stored once per distinct content.
//
// A model's repeated layers give thousands of edges with the same matrix
// (same strategies, same redistribution costs): on a 3-D mesh one copy per
// edge was most of the model's memory, and touching it (page faults, passes
// of the search) most of the time. Edges then share a block of `mat`: their
// ModelEdge::off may be equal, so a model's matrices are read-only once built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/solver/problem.h"

namespace tlm::solver {

class MatrixPool {
 public:
  explicit MatrixPool(std::vector<Cost>& mat) : mat_(mat) {}
  // Offset in `mat` of a block equal to [data, data + n), appended when new.
  size_t add(const Cost* data, size_t n, bool* appended = nullptr);

 private:
  std::vector<Cost>& mat_;
  std::unordered_multimap<uint64_t, std::pair<size_t, size_t>> index_;  // content hash -> (off, n)
};

}  // namespace tlm::solver
