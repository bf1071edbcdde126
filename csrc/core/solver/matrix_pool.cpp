#include "core/solver/matrix_pool.h"

#include <algorithm>

namespace tlm::solver {

size_t MatrixPool::add(const Cost* data, size_t n, bool* appended) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ n;
  for (size_t k = 0; k < n; ++k) {
    h ^= static_cast<uint64_t>(data[k]);
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 31;
  }
  auto [lo, hi] = index_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const auto [off, size] = it->second;
    if (size == n && std::equal(data, data + n, mat_.begin() + static_cast<std::ptrdiff_t>(off))) {
      if (appended) *appended = false;
      return off;
    }
  }
  const size_t off = mat_.size();
  mat_.insert(mat_.end(), data, data + n);
  index_.emplace(h, std::make_pair(off, n));
  if (appended) *appended = true;
  return off;
}

}  // namespace tlm::solver
