// Range-add / range-min segment tree over memory check points. The solver
// keeps "slack" = capacity - load per point: a strategy change of node i is
// memory-feasible when its usage increase fits the minimum slack over i's
// live points. __int128 so sums of 64-bit usages never overflow.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tlm::solver {

class SlackTree {
 public:
  SlackTree() = default;
  explicit SlackTree(const std::vector<__int128>& init) { build(init); }

  void build(const std::vector<__int128>& init) {
    n_ = init.size();
    size_ = 1;
    while (size_ < std::max<size_t>(n_, 1)) size_ <<= 1;
    mn_.assign(2 * size_, kBig);
    lazy_.assign(2 * size_, 0);
    for (size_t i = 0; i < n_; ++i) mn_[size_ + i] = init[i];
    for (size_t i = size_ - 1; i >= 1; --i) mn_[i] = std::min(mn_[2 * i], mn_[2 * i + 1]);
  }
  size_t size() const { return n_; }

  void add(size_t l, size_t r, __int128 v) {
    if (l < r && v != 0) add(1, 0, size_, l, r, v);
  }
  __int128 min(size_t l, size_t r) const { return l < r ? min(1, 0, size_, l, r) : kBig; }
  __int128 global_min() const { return mn_[1]; }
  // Index of the leftmost point whose value equals the global minimum.
  // Index of the leftmost point holding the global minimum.
  size_t argmin() const { return argmin_rec(); }
  __int128 value(size_t k) const { return min(k, k + 1); }
  std::vector<__int128> values() const {
    std::vector<__int128> out(n_);
    for (size_t k = 0; k < n_; ++k) out[k] = value(k);
    return out;
  }

  static constexpr __int128 kBig = static_cast<__int128>(1) << 120;

 private:
  size_t n_ = 0, size_ = 1;
  std::vector<__int128> mn_, lazy_;  // mn_[x] includes lazy_[x]; lazy_ applies to the children

  void add(size_t x, size_t lo, size_t hi, size_t l, size_t r, __int128 v) {
    if (r <= lo || hi <= l) return;
    if (l <= lo && hi <= r) {
      mn_[x] += v;
      lazy_[x] += v;
      return;
    }
    size_t mid = (lo + hi) / 2;
    add(2 * x, lo, mid, l, r, v);
    add(2 * x + 1, mid, hi, l, r, v);
    mn_[x] = std::min(mn_[2 * x], mn_[2 * x + 1]) + lazy_[x];
  }
  __int128 min(size_t x, size_t lo, size_t hi, size_t l, size_t r) const {
    if (r <= lo || hi <= l) return kBig;
    if (l <= lo && hi <= r) return mn_[x];
    size_t mid = (lo + hi) / 2;
    return std::min(min(2 * x, lo, mid, l, r), min(2 * x + 1, mid, hi, l, r)) + lazy_[x];
  }
  size_t argmin_rec() const {
    size_t x = 1;
    __int128 target = mn_[1];
    while (x < size_) {
      target -= lazy_[x];
      x = mn_[2 * x] == target ? 2 * x : 2 * x + 1;
    }
    return x - size_;
  }
};

}  // namespace tlm::solver
