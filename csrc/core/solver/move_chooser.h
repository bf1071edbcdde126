// Which improving move the region search runs next: an exact region
// (coarse_lns.h) or a burst of kicks (kick.h), chosen by measurement.
//
// Regions pay on graphs that fold into groups HiGHS solves quickly; on cyclic
// cores that do not fold they rarely improve and the cheap kicks do the work.
// Neither is known in advance, so each move's cost removed per second over
// its last `window` runs decides. A move not yet measured is tried first
// (regions before kicks), and every `explore_every`-th choice takes the move
// that pays less, so one that stopped paying is found out and one that
// started paying is noticed. Deterministic: no randomness, no clocks.
#pragma once

#include <algorithm>
#include <deque>

namespace tlm::solver {

class MoveChooser {
 public:
  enum Move { kRegion = 0, kKicks = 1 };

  MoveChooser(int window, int explore_every)
      : window_(std::max(1, window)), explore_every_(std::max(2, explore_every)) {}

  Move next() {
    Move pick;
    if (runs_[kRegion].empty()) {
      pick = kRegion;
    } else if (runs_[kKicks].empty()) {
      pick = kKicks;
    } else {
      pick = rate(kKicks) > rate(kRegion) ? kKicks : kRegion;
      if (++measured_choices_ % explore_every_ == 0) pick = pick == kKicks ? kRegion : kKicks;
    }
    ++chosen_[pick];
    return pick;
  }

  // One run of `move`: the cost it removed (negative counts as none) in `seconds`.
  void record(Move move, double gain, double seconds) {
    auto& r = runs_[move];
    r.push_back({std::max(gain, 0.0), std::max(seconds, 1e-6)});
    if (static_cast<int>(r.size()) > window_) r.pop_front();
  }

  // Cost removed per second over the move's window (0 before any run).
  double rate(Move move) const {
    double gain = 0, seconds = 0;
    for (const Run& r : runs_[move]) gain += r.gain, seconds += r.seconds;
    return seconds > 0 ? gain / seconds : 0.0;
  }
  int times_chosen(Move move) const { return chosen_[move]; }

 private:
  struct Run {
    double gain, seconds;
  };
  int window_, explore_every_;
  int measured_choices_ = 0;
  int chosen_[2] = {0, 0};
  std::deque<Run> runs_[2];
};

}  // namespace tlm::solver
