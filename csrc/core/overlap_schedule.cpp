#include "core/overlap_schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>
#include <string>

#include "core/placement.h"

namespace tlm {
namespace {

constexpr int kAnchor = -1;

class Scheduler {
 public:
  Scheduler(const std::vector<ScheduleNode>& nodes, int64_t limit, int max_inflight)
      : nodes_(nodes), limit_(max_inflight > 0 ? -1 : limit), max_inflight_(max_inflight), n_(static_cast<int>(nodes.size())), users_(n_),
        group_(n_, kAnchor), emitted_(n_, false), issued_(n_, false), missing_(n_, 0), waiting_on_(n_),
        wait_of_(n_, -1) {
    check();
    for (int i = 0; i < n_; ++i)
      for (int in : nodes_[i].inputs) users_[in].push_back(i);
    for (int i = 0; i < n_; ++i)  // a collective's first wait (one without a wait is never waited for)
      if (is_wait(i) && wait_of_[nodes_[i].inputs[0]] < 0) wait_of_[nodes_[i].inputs[0]] = i;
    assign_sink_groups();
    assign_hoist_groups();
    collect_external_inputs();
    find_consumed();
  }

  std::vector<int> run() {
    for (int s = 0; s < n_; ++s)  // collectives that need nothing at all
      if (nodes_[s].kind == ScheduleKind::Start && missing_[s] == 0) enqueue(s);
    issuing_ = true;  // the collectives the placeholders make ready are queued together, then issued
    for (int i = 0; i < n_; ++i)  // placeholders first, as graphs list them
      if (nodes_[i].kind == ScheduleKind::Fixed && nodes_[i].inputs.empty()) ensure(i);
    issuing_ = false;
    issue_ready();
    for (int i = 0; i < n_; ++i)
      if (group_[i] == kAnchor) ensure(i);
    for (int i = 0; i < n_; ++i) ensure(i);  // dead waits and their post-processing
    return order_;
  }

 private:
  void check() const {
    if (max_inflight_ == 0)
      throw InvalidArgument("overlap schedule: max_inflight must be at least 1 collective, or < 0 for no bound");
    for (int i = 0; i < n_; ++i) {
      for (int in : nodes_[i].inputs)
        if (in < 0 || in >= i)
          throw InvalidArgument("overlap schedule: node " + std::to_string(i) + " has input " + std::to_string(in) +
                                "; expected an earlier node (the nodes must be in a valid order)");
      if (nodes_[i].kind == ScheduleKind::Wait &&
          (nodes_[i].inputs.size() != 1 || nodes_[nodes_[i].inputs[0]].kind != ScheduleKind::Start))
        throw InvalidArgument("overlap schedule: wait node " + std::to_string(i) +
                              " must have exactly one input, a collective start");
    }
  }

  bool is_start(int i) const { return nodes_[i].kind == ScheduleKind::Start; }
  bool is_wait(int i) const { return nodes_[i].kind == ScheduleKind::Wait; }

  // A Wait and the data movement fed only by it (directly or through each other).
  void assign_sink_groups() {
    for (int i = 0; i < n_; ++i) {
      if (is_wait(i)) {
        group_[i] = i;
        continue;
      }
      if (nodes_[i].kind != ScheduleKind::Move || nodes_[i].inputs.empty()) continue;
      const int g = group_[nodes_[i].inputs[0]];
      if (g == kAnchor || !is_wait(g)) continue;
      bool all = true;
      for (int in : nodes_[i].inputs) all = all && group_[in] == g;
      if (all) group_[i] = g;
    }
  }

  // A Start and the data movement whose every user is in its group (what only
  // this collective consumes). Walks backwards so users are assigned first.
  void assign_hoist_groups() {
    for (int i = n_ - 1; i >= 0; --i) {
      if (is_start(i)) {
        group_[i] = i;
        continue;
      }
      if (group_[i] != kAnchor || nodes_[i].kind != ScheduleKind::Move || users_[i].empty()) continue;
      const int g = group_[users_[i][0]];
      if (g == kAnchor || !is_start(g)) continue;
      bool all = true;
      for (int u : users_[i]) all = all && group_[u] == g;
      if (all) group_[i] = g;
    }
    for (int i = 0; i < n_; ++i)
      if (group_[i] != kAnchor && is_start(group_[i])) members_[group_[i]].push_back(i);
  }

  void collect_external_inputs() {
    for (const auto& [s, members] : members_) {
      std::vector<int> ext;
      for (int m : members)
        for (int in : nodes_[m].inputs)
          if (group_[in] != s) ext.push_back(in);
      std::sort(ext.begin(), ext.end());
      ext.erase(std::unique(ext.begin(), ext.end()), ext.end());
      for (int e : ext) waiting_on_[e].push_back(s);
      missing_[s] = static_cast<int>(ext.size());
      external_[s] = std::move(ext);
    }
  }

  // Collectives whose result the graph computes with (a node outside the Wait's group
  // other than the output reads it): a gathered parameter, not a reduced gradient.
  // Also where each is first read: such collectives wait in the ready queue in the
  // order they are read, not the order they became ready -- a backward's gathers are
  // all ready at its start (their inputs are placeholders) but read last layer first.
  void find_consumed() {
    consumed_.assign(n_, 0);
    first_read_.assign(n_, n_);
    for (int i = 0; i < n_; ++i) {
      if (nodes_[i].kind == ScheduleKind::Fixed) continue;
      for (int in : nodes_[i].inputs) {
        const int w = group_[in];
        if (w == kAnchor || !is_wait(w) || group_[i] == w) continue;
        const int s = nodes_[w].inputs[0];
        consumed_[s] = 1;
        first_read_[s] = std::min(first_read_[s], i);
      }
    }
  }

  // A ready collective joins the queue at its end, or, if the graph computes with its
  // result, before the first such collective read after it (the byte and count bounds
  // and a needed collective's drain then fetch in the order of use). Every rank's graph
  // has the same structure, so every rank queues alike.
  void enqueue(int s) {
    auto at = queue_.end();
    if (max_inflight_ > 0 && consumed_[s])
      at = std::find_if(queue_.begin(), queue_.end(), [&](int q) { return consumed_[q] && first_read_[q] > first_read_[s]; });
    queue_.insert(at, s);
  }

  void emit(int i) {
    emitted_[i] = true;
    order_.push_back(i);
    for (int s : waiting_on_[i])
      if (--missing_[s] == 0) enqueue(s);
    if (is_start(i)) {
      inflight_ += nodes_[i].bytes;
      if (wait_of_[i] >= 0) awaited_.push_back(i);
    }
    if (is_wait(i)) {
      const int s = nodes_[i].inputs[0];
      inflight_ -= nodes_[s].bytes;
      awaited_.erase(std::remove(awaited_.begin(), awaited_.end(), s), awaited_.end());
    }
    if (max_inflight_ > 0 && !held_.empty()) {
      // A held result is released when a reader needs it: its Wait emitted for a reader
      // (the next one is then fetched while that reader computes), or, where the count
      // bound forced the Wait earlier, its first reader outside the Wait's group.
      auto release = [&](int start) {
        const auto it = std::find(held_.begin(), held_.end(), start);
        if (it != held_.end()) held_.erase(it);
      };
      if (is_wait(i) && !forcing_) release(nodes_[i].inputs[0]);
      if (nodes_[i].kind != ScheduleKind::Fixed)
        for (int in : nodes_[i].inputs) {
          const int w = group_[in];
          if (w != kAnchor && is_wait(w) && group_[i] != w) release(nodes_[w].inputs[0]);
        }
    }
    issue_ready();
  }

  // Issues queued collectives, in queue order, while the bound allows.
  void issue_ready() {
    if (issuing_) return;  // the outer call's loop continues
    issuing_ = true;
    while (!queue_.empty()) {
      auto at = queue_.begin();
      // Held results at their bound: the next collective not computed with (a gradient's
      // reduction) goes ahead of the gathers that wait. The bound, unlike bytes, is the
      // same on every rank, so they all pass alike.
      if (max_inflight_ > 0 && held_.size() >= static_cast<size_t>(max_inflight_))
        at = std::find_if(queue_.begin(), queue_.end(), [&](int q) { return !consumed_[q]; });
      if (at == queue_.end()) break;
      const int s = *at;
      if (limit_ >= 0 && inflight_ > 0 && inflight_ + nodes_[s].bytes > limit_) break;
      queue_.erase(at);
      issue(s);
    }
    issuing_ = false;
  }

  void issue(int s) {
    // At the count bound, the oldest collective in flight is waited for first.
    while (max_inflight_ > 0 && static_cast<int>(awaited_.size()) >= max_inflight_) {
      const bool was_forcing = forcing_;
      forcing_ = true;
      ensure(wait_of_[awaited_.front()]);
      forcing_ = was_forcing;
    }
    issued_[s] = true;
    if (consumed_[s]) held_.push_back(s);
    for (int m : members_[s]) emit(m);  // members are in a valid order; their outside inputs are emitted
  }

  // Emits `root` and what it needs. A group member is emitted with its whole group;
  // a collective needed now first issues every collective queued before it.
  void ensure(int root) {
    std::vector<int> stack{root};
    while (!stack.empty()) {
      const int i = stack.back();
      if (emitted_[i]) {
        stack.pop_back();
        continue;
      }
      const int g = group_[i];
      const bool hoisted = g != kAnchor && is_start(g);
      const std::vector<int>& needs = hoisted ? external_[g] : nodes_[i].inputs;
      bool pending = false;
      for (int in : needs)
        if (!emitted_[in]) {
          stack.push_back(in);
          pending = true;
        }
      if (pending) continue;
      stack.pop_back();
      if (!hoisted) {
        emit(i);
        continue;
      }
      const bool was_issuing = issuing_;
      issuing_ = true;  // drained here, in queue order, regardless of the bound
      while (!issued_[g]) {
        if (queue_.empty()) throw std::logic_error("overlap schedule: a ready collective is missing from the queue");
        const int s = queue_.front();
        queue_.pop_front();
        issue(s);
      }
      issuing_ = was_issuing;
      if (!issuing_) issue_ready();
    }
  }

  const std::vector<ScheduleNode>& nodes_;
  const int64_t limit_;
  const int max_inflight_;
  const int n_;
  std::vector<std::vector<int>> users_;
  std::vector<int> group_;  // kAnchor, or the Start / Wait whose group the node belongs to
  std::map<int, std::vector<int>> members_, external_;  // per Start: its group, its group's outside inputs
  std::vector<bool> emitted_, issued_;
  std::vector<int> missing_;                  // per Start: outside inputs not emitted yet
  std::vector<std::vector<int>> waiting_on_;  // per node: Starts whose group needs it
  std::vector<int> wait_of_;                  // per Start: its first Wait (-1: none)
  std::deque<int> awaited_;                   // Starts emitted whose Wait is not, oldest first
  std::vector<char> consumed_;                // per Start: the graph computes with its result
  std::vector<int> first_read_;               // per such Start: its first reader's index
  std::vector<int> held_;                     // such Starts issued, their result not read yet
  std::deque<int> queue_;                     // ready collectives, in the order they became ready
  std::vector<int> order_;
  int64_t inflight_ = 0;
  bool issuing_ = false;
  bool forcing_ = false;  // emitting a Wait the count bound forces, not one a reader needs
};

}  // namespace

std::vector<int> overlap_order(const std::vector<ScheduleNode>& nodes, int64_t inflight_limit, int max_inflight) {
  return Scheduler(nodes, inflight_limit, max_inflight).run();
}

}  // namespace tlm
