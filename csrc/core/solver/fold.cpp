#include "core/solver/fold.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

namespace tlm::solver {

namespace {

// Sums of finite costs that leave int64 (or reach the forbidden marker) set `overflow`: the
// fold is then refused rather than made inexact.
Cost add_cost(Cost a, Cost b, bool& overflow) {
  if (a == kInfiniteCost || b == kInfiniteCost) return kInfiniteCost;
  Cost out = 0;
  if (__builtin_add_overflow(a, b, &out) || out == kInfiniteCost) overflow = true;
  return out;
}

Cost times(Cost a, int count, bool& overflow) {
  Cost out = 0;
  if (__builtin_mul_overflow(a, static_cast<Cost>(count), &out) || out == kInfiniteCost) overflow = true;
  return out;
}

// One source of a folded edge: a full edge's matrix, read transposed or not, `count` times.
struct Source {
  const std::vector<Cost>* matrix = nullptr;
  bool transposed = false;
  int count = 0;
  CostMatrix keep;  // the shared matrix (the pointer above stays valid)

  bool operator<(const Source& o) const {
    return std::tie(matrix, transposed, count) < std::tie(o.matrix, o.transposed, o.count);
  }
};

// Sums of edge matrices, built once per distinct list of sources: a model's repeated layers
// fold to many class pairs whose edges are the same matrices the same number of times.
class EdgeSums {
 public:
  bool overflow = false;

  CostMatrix sum(const std::vector<Source>& sources, size_t rows, size_t cols) {
    if (sources.size() == 1 && sources[0].count == 1 && !sources[0].transposed) return sources[0].keep;
    auto it = built_.find(sources);
    if (it != built_.end()) return it->second;
    std::vector<Cost> out(rows * cols, 0);
    for (const Source& s : sources)
      for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < cols; ++c) {
          const Cost x = s.transposed ? (*s.matrix)[c * rows + r] : (*s.matrix)[r * cols + c];
          Cost& o = out[r * cols + c];
          o = x == kInfiniteCost ? kInfiniteCost : add_cost(o, times(x, s.count, overflow), overflow);
        }
    CostMatrix m = make_cost_matrix(std::move(out));
    built_.emplace(sources, m);
    return m;
  }

 private:
  std::map<std::vector<Source>, CostMatrix> built_;
};

}  // namespace

std::optional<Folding> fold_problem(const Problem& p, const std::vector<std::vector<int>>& classes,
                                    const std::vector<char>& keep_step, std::string* why) {
  auto fail = [&](std::string reason) -> std::optional<Folding> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  const size_t n = p.nodes.size();
  std::vector<int> class_of(n, -1);
  for (size_t c = 0; c < classes.size(); ++c)
    for (int v : classes[c]) {
      if (v < 0 || static_cast<size_t>(v) >= n) return fail("class member " + std::to_string(v) + " is not a node");
      if (class_of[static_cast<size_t>(v)] >= 0) return fail("node " + std::to_string(v) + " is in two classes");
      class_of[static_cast<size_t>(v)] = static_cast<int>(c);
    }
  // Folded nodes in the order of each class's first member; members in node order.
  Folding f;
  f.node_of.assign(n, -1);
  std::vector<std::vector<int>> members;
  std::vector<int> folded_of_class(classes.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    const int c = class_of[i];
    int& id = c >= 0 ? folded_of_class[static_cast<size_t>(c)] : f.node_of[i];
    if (id < 0) {
      id = static_cast<int>(members.size());
      members.emplace_back();
    }
    f.node_of[i] = id;
    members[static_cast<size_t>(id)].push_back(static_cast<int>(i));
  }

  // Memory steps kept, and each interval shrunk to the kept steps it covers. Steps from
  // keep_step.size() on are all kept: they squeeze to themselves, shifted.
  int64_t horizon = 0;
  for (const Node& node : p.nodes) horizon = std::max(horizon, node.end);
  const int64_t listed = static_cast<int64_t>(keep_step.size());
  std::vector<int64_t>& kept = f.step;
  for (int64_t t = 0; t < listed; ++t)
    if (keep_step[static_cast<size_t>(t)]) kept.push_back(t);
  f.kept_steps = kept.size() + static_cast<size_t>(std::max<int64_t>(0, horizon - listed));
  f.listed_steps = listed;
  auto squeeze = [&](int64_t t) {
    if (t >= listed) return static_cast<int64_t>(kept.size()) + (t - listed);
    return static_cast<int64_t>(std::lower_bound(kept.begin(), kept.end(), t) - kept.begin());
  };

  const size_t classes_n = members.size();
  bool overflow = false;
  Problem& q = f.problem;
  q.name = p.name + " (folded)";
  q.usage_limit = p.usage_limit;
  q.nodes.resize(classes_n);
  std::vector<Node> shadows;
  std::vector<Coupling> shadow_links;
  for (size_t c = 0; c < classes_n; ++c) {
    const std::vector<int>& m = members[c];
    const Node& first = p.nodes[static_cast<size_t>(m[0])];
    const size_t width = first.strategies.size();
    Node& out = q.nodes[c];
    out.strategies.assign(width, Strategy{});
    out.pinned = first.pinned;
    std::map<std::pair<int64_t, int64_t>, std::vector<Usage>> loads;  // by squeezed interval
    for (int v : m) {
      const Node& node = p.nodes[static_cast<size_t>(v)];
      if (node.strategies.size() != width)
        return fail("node " + std::to_string(v) + " has " + std::to_string(node.strategies.size()) +
                    " strategies, its class " + std::to_string(width));
      if (node.pinned >= 0) {
        if (out.pinned >= 0 && out.pinned != node.pinned) return fail("a class's members are pinned apart");
        out.pinned = node.pinned;
      }
      bool uses = false;
      for (size_t s = 0; s < width; ++s) {
        const Usage u = node.strategies[s].usage;
        const bool allowed = (!node.usage_lower || u >= *node.usage_lower) && (!node.usage_upper || u <= *node.usage_upper);
        out.strategies[s].cost =
            allowed ? add_cost(out.strategies[s].cost, node.strategies[s].cost, overflow) : kInfiniteCost;
        uses = uses || u != 0;
      }
      if (!uses || node.start >= node.end) continue;
      const int64_t lo = squeeze(node.start), hi = squeeze(node.end);
      if (lo >= hi) continue;  // alive at no kept step
      std::vector<Usage>& load = loads[{lo, hi}];
      load.resize(width, 0);
      for (size_t s = 0; s < width; ++s)
        if (__builtin_add_overflow(load[s], node.strategies[s].usage, &load[s])) overflow = true;
    }
    bool primary = true;
    for (const auto& [span, load] : loads) {
      Node* target = &out;
      if (!primary) {  // a cost-free copy of the class's choice, alive over another interval
        shadows.emplace_back();
        target = &shadows.back();
        target->strategies.assign(width, Strategy{});
        std::vector<int> same(width);
        for (size_t s = 0; s < width; ++s) same[s] = static_cast<int>(s);
        shadow_links.push_back({static_cast<int>(c), static_cast<int>(classes_n + shadows.size() - 1), same});
      }
      target->start = span.first;
      target->end = span.second;
      for (size_t s = 0; s < width; ++s) target->strategies[s].usage = load[s];
      primary = false;
    }
  }

  // Edges between classes, summed per class pair; inside one class, its diagonal.
  std::map<std::pair<int, int>, std::map<std::pair<const std::vector<Cost>*, bool>, Source>> between;
  for (const Edge& e : p.edges) {
    const int a = f.node_of[static_cast<size_t>(e.u)], b = f.node_of[static_cast<size_t>(e.v)];
    const std::vector<Cost>& mat = *e.costs;
    if (a == b) {
      std::vector<Strategy>& st = q.nodes[static_cast<size_t>(a)].strategies;
      for (size_t s = 0; s < st.size(); ++s) st[s].cost = add_cost(st[s].cost, mat[s * st.size() + s], overflow);
      continue;
    }
    const bool transposed = a > b;
    Source& src = between[{std::min(a, b), std::max(a, b)}][{&mat, transposed}];
    src.matrix = &mat;
    src.transposed = transposed;
    src.keep = e.costs;
    ++src.count;
  }
  EdgeSums sums;
  for (const auto& [pair, by_matrix] : between) {
    std::vector<Source> sources;
    for (const auto& kv : by_matrix) sources.push_back(kv.second);
    const size_t rows = q.nodes[static_cast<size_t>(pair.first)].strategies.size();
    const size_t cols = q.nodes[static_cast<size_t>(pair.second)].strategies.size();
    q.edges.emplace_back(pair.first, pair.second, sums.sum(sources, rows, cols));
  }
  if (overflow || sums.overflow) return fail("summed costs or usages leave the 64-bit range");

  // Couplings between classes, once each; inside one class, its strategies the map moves.
  std::map<std::tuple<int, int, std::vector<int>>, bool> seen;
  for (const Coupling& c : p.couplings) {
    const int a = f.node_of[static_cast<size_t>(c.u)], b = f.node_of[static_cast<size_t>(c.v)];
    if (a == b) {
      std::vector<Strategy>& st = q.nodes[static_cast<size_t>(a)].strategies;
      for (size_t s = 0; s < st.size(); ++s)
        if (c.map[s] != static_cast<int>(s)) st[s].cost = kInfiniteCost;
      continue;
    }
    if (seen.emplace(std::make_tuple(a, b, c.map), true).second) q.couplings.push_back({a, b, c.map});
  }
  f.shadows = static_cast<int>(shadows.size());
  for (Node& s : shadows) q.nodes.push_back(std::move(s));
  for (Coupling& c : shadow_links) q.couplings.push_back(std::move(c));
  return f;
}

Solution unfold(const Folding& folding, const Solution& folded) {
  Solution out(folding.node_of.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = folded[static_cast<size_t>(folding.node_of[i])];
  return out;
}

}  // namespace tlm::solver
