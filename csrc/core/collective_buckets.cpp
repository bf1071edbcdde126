#include "core/collective_buckets.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "core/placement.h"

namespace tlm {
namespace {

// Bitset over the program's Waits: which of them each node depends on.
class WaitAncestors {
 public:
  explicit WaitAncestors(const std::vector<ScheduleNode>& nodes) : n_(nodes.size()) {
    std::vector<int> wait_index(n_, -1);
    for (size_t i = 0; i < n_; ++i)
      if (nodes[i].kind == ScheduleKind::Wait) wait_index[i] = waits_++;
    words_ = (static_cast<size_t>(waits_) + 63) / 64;
    bits_.assign(n_ * words_, 0);
    for (size_t i = 0; i < n_; ++i)
      for (int in : nodes[i].inputs) {
        const size_t src = static_cast<size_t>(in);
        for (size_t w = 0; w < words_; ++w) bits_[i * words_ + w] |= bits_[src * words_ + w];
        if (wait_index[src] >= 0) set(i, wait_index[src]);
      }
    wait_index_ = std::move(wait_index);
  }
  // Whether node `node` depends on the Wait `wait`.
  bool depends(int node, int wait) const {
    const int k = wait_index_.at(static_cast<size_t>(wait));
    return k >= 0 && (bits_[static_cast<size_t>(node) * words_ + static_cast<size_t>(k) / 64] >> (k % 64)) & 1u;
  }

 private:
  void set(size_t node, int k) { bits_[node * words_ + static_cast<size_t>(k) / 64] |= uint64_t{1} << (k % 64); }
  size_t n_;
  int waits_ = 0;
  size_t words_ = 0;
  std::vector<uint64_t> bits_;
  std::vector<int> wait_index_;
};

}  // namespace

std::vector<int> collective_buckets(const std::vector<ScheduleNode>& nodes, const std::vector<int>& keys,
                                    int64_t cap_bytes, const std::vector<int64_t>& first_cap_bytes) {
  const size_t n = nodes.size();
  if (keys.size() != n) throw InvalidArgument("collective_buckets: expected one key per node");
  if (cap_bytes <= 0) throw InvalidArgument("collective_buckets: the byte cap must be positive");
  for (int64_t c : first_cap_bytes)
    if (c < 0) throw InvalidArgument("collective_buckets: a first bucket's byte cap must be >= 0 (0: the byte cap)");
  std::vector<int> wait_of(n, -1);
  for (size_t i = 0; i < n; ++i) {
    for (int in : nodes[i].inputs)
      if (in < 0 || static_cast<size_t>(in) >= i)
        throw InvalidArgument("collective_buckets: node " + std::to_string(i) + " has input " + std::to_string(in) +
                              " that is not an earlier node");
    if (nodes[i].kind == ScheduleKind::Wait) {
      if (nodes[i].inputs.size() != 1 || nodes[static_cast<size_t>(nodes[i].inputs[0])].kind != ScheduleKind::Start)
        throw InvalidArgument("collective_buckets: wait " + std::to_string(i) + " must have one Start as its input");
      wait_of[static_cast<size_t>(nodes[i].inputs[0])] = static_cast<int>(i);
    }
  }
  // Candidates in the order their inputs are ready (ties: graph order).
  std::vector<int> starts;
  std::vector<int> ready(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (nodes[i].kind != ScheduleKind::Start || keys[i] < 0 || wait_of[i] < 0) continue;
    for (int in : nodes[i].inputs) ready[i] = std::max(ready[i], in);
    starts.push_back(static_cast<int>(i));
  }
  std::stable_sort(starts.begin(), starts.end(), [&](int a, int b) { return ready[a] < ready[b]; });
  const WaitAncestors ancestors(nodes);
  struct Open {
    std::vector<int> members;
    int64_t bytes = 0;
    std::set<int> after;  // keys of open buckets this one must be issued after
  };
  struct Closed {
    std::vector<int> members;
    int issue = 0;  // the node after which it can be issued: its last input, and its predecessors'
  };
  std::map<int, Open> open;           // by key: the bucket being filled
  std::map<int, int> buckets_of_key;  // by key: buckets closed so far (empty ones too)
  std::map<int, int> issue_of_key;    // by key: when the last bucket closed for it can be issued
  std::vector<Closed> closed;
  // Closing a bucket closes the open buckets it must follow first, so a closed bucket never
  // waits on an open one (which a later member could make wait on it in turn: a cycle).
  std::function<void(int)> close = [&](int key) {
    Open b = std::move(open[key]);
    open[key] = Open{};
    int issue = b.members.empty() ? 0 : ready[static_cast<size_t>(b.members.back())];
    for (int k : b.after) {
      if (!open[k].members.empty()) close(k);
      issue = std::max(issue, issue_of_key[k]);
    }
    if (b.members.size() > 1) closed.push_back({b.members, issue});
    if (!b.members.empty()) ++buckets_of_key[key], issue_of_key[key] = issue;
  };
  // Whether open bucket `from` must (through the buckets it follows) be issued after `to`.
  std::function<bool(int, int)> follows = [&](int from, int to) {
    for (int k : open[from].after)
      if (k == to || follows(k, to)) return true;
    return false;
  };
  auto cap_of = [&](int key) {
    const bool first = buckets_of_key[key] == 0;
    const auto k = static_cast<size_t>(key);
    return first && k < first_cap_bytes.size() && first_cap_bytes[k] > 0 ? first_cap_bytes[k] : cap_bytes;
  };
  for (int s : starts) {
    const int key = keys[static_cast<size_t>(s)];
    // An open bucket with a member whose result feeds this one's input must be issued
    // before this input exists. Of this one's own key it is closed. Of another key it stays
    // open, and this one's bucket follows it: a gradient reduced over one mesh dim and then
    // another is bucketed on both, as the cost model prices it -- unless that bucket already
    // follows this key's open one (a cycle): then it is closed, with what it follows.
    std::vector<int> feeding;
    for (auto& kv : open) {
      bool feeds = false;
      for (int m : kv.second.members) feeds = feeds || ancestors.depends(s, wait_of[static_cast<size_t>(m)]);
      if (feeds) feeding.push_back(kv.first);
    }
    for (int k : feeding) {
      if (open[k].members.empty()) continue;  // closed by an earlier one of this loop
      if (k == key || follows(k, key))
        close(k);
      else
        open[key].after.insert(k);
    }
    Open& b = open[key];  // close() empties the entry in place: `b` stays this key's open bucket
    // Full: closed, with the buckets it follows (this member's input is ready after theirs).
    if (!b.members.empty() && b.bytes + nodes[static_cast<size_t>(s)].bytes > cap_of(key)) close(key);
    b.members.push_back(s);
    b.bytes += nodes[static_cast<size_t>(s)].bytes;
  }
  for (auto& kv : open)  // close() only reassigns existing entries: the iteration stays valid
    if (!kv.second.members.empty()) close(kv.first);
  // Ids in issue order: a bucket is issued when its last member's input is ready and the
  // buckets it follows are issued (ties: the order they closed in, which puts those first).
  std::stable_sort(closed.begin(), closed.end(), [](const Closed& a, const Closed& b) { return a.issue < b.issue; });
  std::vector<int> out(n, -1);
  for (size_t k = 0; k < closed.size(); ++k)
    for (int s : closed[k].members) out[static_cast<size_t>(s)] = static_cast<int>(k);
  return out;
}

}  // namespace tlm
