#include "core/solver/coarsen.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "core/solver/cost_math.h"
#include "core/solver/matrix_pool.h"

namespace tlm::solver {
namespace {

Cost entry(const Model& m, int e, int su, int sv) {
  const auto& ed = m.edges[e];
  return m.mat[ed.off + static_cast<size_t>(su) * m.num_strategies(ed.v) + sv];
}

// Each node's and each edge's cheapest entry, and their sum: no labelling
// costs less (an edge with every pair forbidden counts 0: then no labelling
// exists at all).
struct Minima {
  std::vector<Cost> node, edge;
  __int128 sum = 0;
};
Minima minima_of(const Model& m) {
  Minima mn;
  mn.node.resize(m.n);
  mn.edge.assign(m.edges.size(), kInfiniteCost);
  for (int i = 0; i < m.n; ++i) {
    mn.node[i] = *std::min_element(m.cost.begin() + m.off[i], m.cost.begin() + m.off[i + 1]);
    mn.sum += mn.node[i];
  }
  // Edges share pooled matrices (repeated layers: thousands of edges, a few matrices), so
  // each distinct matrix (its offset and size) is scanned once.
  std::unordered_map<size_t, std::pair<size_t, Cost>> seen;  // offset -> (cells, minimum)
  for (size_t e = 0; e < m.edges.size(); ++e) {
    const auto& ed = m.edges[e];
    const size_t cells = static_cast<size_t>(m.num_strategies(ed.u)) * m.num_strategies(ed.v);
    const auto found = seen.find(ed.off);
    Cost low = kInfiniteCost;
    if (found != seen.end() && found->second.first == cells) {
      low = found->second.second;
    } else {
      for (size_t k = 0; k < cells; ++k) low = std::min(low, m.mat[ed.off + k]);
      if (low == kInfiniteCost) low = 0;
      seen[ed.off] = {cells, low};
    }
    mn.edge[e] = low;
    mn.sum += low;
  }
  return mn;
}

int find(std::vector<int>& p, int x) {
  while (p[x] != x) x = p[x] = p[p[x]];
  return x;
}

// ub - lb + minimum as an entry limit: clamped to the finite cost range, so
// kInfiniteCost is never within it.
Cost clamp_limit(__int128 l) {
  if (l > kHugeCost) return kHugeCost;
  if (l < std::numeric_limits<Cost>::min()) return std::numeric_limits<Cost>::min();
  return static_cast<Cost>(l);
}

// Builds the member slots, the coarse model's edges and adjacency from the groups and maps.
void build_coarse_edges(const Model& m, Coarsening& c, Clock::time_point deadline) {
  Model& cm = c.coarse;
  c.slot_of.assign(m.n, 0);
  for (int g = 0; g < cm.n; ++g)
    for (size_t sl = c.member_off[g]; sl < c.member_off[g + 1]; ++sl) c.slot_of[c.members[sl]] = sl;
  const std::vector<size_t>& slot_of = c.slot_of;
  // The coarse edges first, then each one's matrix summed from its fine
  // edges into a buffer and stored once per distinct content (matrix_pool.h:
  // repeated layers give thousands of equal matrices).
  std::unordered_map<uint64_t, int> index;
  std::vector<std::vector<int>> adj(cm.n);
  std::vector<std::vector<int>> fine_edges;  // per coarse edge
  for (size_t e = 0; e < m.edges.size(); ++e) {
    const auto& ed = m.edges[e];
    int g = c.group_of[ed.u], h = c.group_of[ed.v];
    if (g == h) continue;
    int a = std::min(g, h), b = std::max(g, h);
    uint64_t key = (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
    auto [it, fresh] = index.emplace(key, static_cast<int>(cm.edges.size()));
    if (fresh) {
      cm.edges.push_back({a, b, 0});
      fine_edges.emplace_back();
      adj[a].push_back(it->second);
      adj[b].push_back(it->second);
    }
    fine_edges[it->second].push_back(static_cast<int>(e));
  }
  // A coarse edge's block is fixed by its fine edges' matrices, their orientation and the
  // member maps on both sides: repeated layers give the same inputs thousands of times, so
  // each distinct combination is summed and pooled once. Maps are compared by content.
  std::vector<int> map_id(c.members.size(), -1);
  {
    std::map<std::vector<int>, int> ids;
    for (int g = 0; g < cm.n; ++g)
      for (size_t sl = c.member_off[g]; sl < c.member_off[g + 1]; ++sl) {
        const auto first = c.map.begin() + static_cast<std::ptrdiff_t>(c.map_off[sl]);
        std::vector<int> content(first, first + cm.num_strategies(g));
        map_id[sl] = ids.emplace(std::move(content), static_cast<int>(ids.size())).first->second;
      }
  }
  std::map<std::vector<int64_t>, size_t> block_of;  // the inputs above -> pooled offset
  std::vector<int64_t> inputs;
  MatrixPool pool(cm.mat);
  std::vector<Cost> block;
  for (size_t id = 0; id < cm.edges.size(); ++id) {
    if (id % 256 == 0 && Clock::now() >= deadline) throw CoarsenTimeout();
    const int a = cm.edges[id].u;
    const int sa = cm.num_strategies(a), sb = cm.num_strategies(cm.edges[id].v);
    inputs.clear();
    for (int e : fine_edges[id]) {
      const auto& ed = m.edges[e];
      const int fa = c.group_of[ed.u] == a ? ed.u : ed.v;
      const int fb = fa == ed.u ? ed.v : ed.u;
      inputs.insert(inputs.end(), {static_cast<int64_t>(ed.off), fa == ed.u ? 1 : 0, m.num_strategies(ed.v),
                                   map_id[slot_of[fa]], map_id[slot_of[fb]]});
    }
    if (const auto found = block_of.find(inputs); found != block_of.end()) {
      cm.edges[id].off = found->second;
      continue;
    }
    block.assign(static_cast<size_t>(sa) * sb, 0);
    bool first = true;  // the first fine edge copies, later ones add
    for (int e : fine_edges[id]) {
      const auto& ed = m.edges[e];
      // fine node on the coarse edge's u side first
      const int fa = c.group_of[ed.u] == a ? ed.u : ed.v;
      const int fb = fa == ed.u ? ed.v : ed.u;
      const int* ra = &c.map[c.map_off[slot_of[fa]]];
      const int* rb = &c.map[c.map_off[slot_of[fb]]];
      const size_t fine_row = static_cast<size_t>(m.num_strategies(ed.v));
      const Cost* in = &m.mat[ed.off];
      for (int r = 0; r < sa; ++r) {
        Cost* o = &block[static_cast<size_t>(r) * sb];
        for (int q = 0; q < sb; ++q) {
          const Cost x = fa == ed.u ? in[ra[r] * fine_row + rb[q]] : in[rb[q] * fine_row + ra[r]];
          o[q] = first ? x : sat_add(o[q], x);
        }
      }
      first = false;
    }
    cm.edges[id].off = pool.add(block.data(), block.size());
    block_of.emplace(inputs, cm.edges[id].off);
  }
  cm.adj_off.assign(1, 0);
  for (auto& a : adj) {
    cm.adj.insert(cm.adj.end(), a.begin(), a.end());
    cm.adj_off.push_back(cm.adj.size());
  }
  cm.plo.assign(cm.n, 0);
  cm.phi.assign(cm.n, 0);
  cm.usage.assign(cm.strat.size(), 0);
}

}  // namespace

int Coarsening::label_of(int g, const std::vector<int>& x) const {
  const size_t root = member_off[g];
  for (int r = 0; r < coarse.num_strategies(g); ++r) {
    if (fine_strategy(root, r) != x[members[root]]) continue;
    for (size_t sl = root + 1; sl < member_off[g + 1]; ++sl)
      if (fine_strategy(sl, r) != x[members[sl]]) return -1;
    return r;  // root strategies are distinct: no other r can match
  }
  return -1;
}

__int128 sum_of_minima(const Model& m) { return minima_of(m).sum; }

__int128 huge_cost_threshold(const Model& m) {
  std::vector<size_t> decade(20, 0);  // decade d holds entries in [10^d, 10^(d+1))
  // floor(log10 c) from the bit length (1233 / 4096 ~ log10 2), corrected by
  // one comparison: a division loop per entry cost seconds on 3-D meshes.
  static const Cost kPow10[19] = {1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL,
                                  100000000LL, 1000000000LL, 10000000000LL, 100000000000LL, 1000000000000LL,
                                  10000000000000LL, 100000000000000LL, 1000000000000000LL,
                                  10000000000000000LL, 100000000000000000LL, 1000000000000000000LL};
  auto count = [&](Cost c) {
    if (c <= 0 || c == kInfiniteCost) return;
    const int bits = 64 - __builtin_clzll(static_cast<unsigned long long>(c));
    int d = (bits * 1233) >> 12;
    if (c < kPow10[d]) --d;
    ++decade[d];
  };
  for (Cost c : m.cost) count(c);
  for (Cost c : m.mat) count(c);
  // highest run of >= 3 empty decades with entries on both sides
  int top = 19;
  while (top >= 0 && decade[top] == 0) --top;
  for (int d = top - 1; d >= 2; --d) {
    if (decade[d] != 0) continue;
    int lo = d;
    while (lo > 0 && decade[lo - 1] == 0) --lo;
    if (d - lo + 1 >= 3 && lo > 0) {
      __int128 t = 1;
      for (int k = 0; k < lo; ++k) t *= 10;
      return t;
    }
    d = lo;
  }
  return -1;
}

Coarsening identity_coarsening(const Model& m, bool with_edges) {
  Coarsening c;
  Model& cm = c.coarse;
  cm.n = m.n;
  cm.off = m.off;
  cm.strat.resize(m.strat.size());
  for (int i = 0; i < m.n; ++i)
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) cm.strat[k] = static_cast<int>(k - m.off[i]);
  cm.cost = m.cost;
  c.group_of.resize(m.n);
  std::iota(c.group_of.begin(), c.group_of.end(), 0);
  c.members = c.group_of;
  c.member_off.resize(m.n + 1);
  std::iota(c.member_off.begin(), c.member_off.end(), 0);
  c.map_off.assign(m.off.begin(), m.off.end() - 1);
  c.map = cm.strat;
  c.slot_of.resize(m.n);
  std::iota(c.slot_of.begin(), c.slot_of.end(), 0);
  if (with_edges) {
    cm.edges = m.edges;
    cm.mat = m.mat;
    cm.adj_off = m.adj_off;
    cm.adj = m.adj;
  }
  cm.plo.assign(cm.n, 0);
  cm.phi.assign(cm.n, 0);
  cm.usage.assign(cm.strat.size(), 0);
  return c;
}

Coarsening coarsen(const Model& m, __int128 ub, Clock::time_point deadline) {
  const Minima mn = minima_of(m);
  const __int128 lb = mn.sum;
  const std::vector<Cost>& node_min = mn.node;
  const std::vector<Cost>& edge_min = mn.edge;
  std::vector<char> ok(m.strat.size());
  for (int i = 0; i < m.n; ++i)
    for (size_t k = m.off[i]; k < m.off[i + 1]; ++k) ok[k] = lb - node_min[i] + m.cost[k] <= ub;
  // An entry is affordable when it is at most its edge's limit, ub - lb + the
  // edge's minimum (clamped to the cost range, below kInfiniteCost): one
  // 64-bit compare per entry, for tests that scan every matrix several times.
  std::vector<Cost> limit(m.edges.size());
  for (size_t e = 0; e < m.edges.size(); ++e) limit[e] = clamp_limit(ub - lb + edge_min[e]);
  auto affordable = [&](int e, int su, int sv) { return entry(m, e, su, sv) <= limit[e]; };
  // Arc consistency over affordable entries: a strategy with no affordable
  // partner on some edge goes. AC-3 over directed arcs (arc 2e revises e's u
  // against its v, arc 2e + 1 the reverse), each strategy resuming its search
  // for a partner where it last found one (partners only ever go), so an
  // edge's matrix is scanned about once however often its arcs are revised.
  std::vector<size_t> support_off(m.edges.size() + 1, 0);
  for (size_t e = 0; e < m.edges.size(); ++e)
    support_off[e + 1] = support_off[e] + m.num_strategies(m.edges[e].u) + m.num_strategies(m.edges[e].v);
  std::vector<int> support(support_off.back(), 0);
  std::deque<int> queue;
  std::vector<char> queued(2 * m.edges.size(), 1);
  for (size_t a = 0; a < 2 * m.edges.size(); ++a) queue.push_back(static_cast<int>(a));
  while (!queue.empty()) {
    const int arc = queue.front();
    queue.pop_front();
    queued[arc] = 0;
    const int e = arc / 2;
    const bool from_v = arc % 2 == 1;
    const auto& ed = m.edges[e];
    const int i = from_v ? ed.v : ed.u, j = from_v ? ed.u : ed.v;
    const int si = m.num_strategies(i), sj = m.num_strategies(j), sv = m.num_strategies(ed.v);
    const Cost* mat = &m.mat[ed.off];
    int* next = &support[support_off[e] + (from_v ? m.num_strategies(ed.u) : 0)];
    bool removed = false;
    for (int s = 0; s < si; ++s) {
      if (!ok[m.off[i] + s]) continue;
      int t = next[s];
      for (; t < sj; ++t) {
        const Cost c = from_v ? mat[static_cast<size_t>(t) * sv + s] : mat[static_cast<size_t>(s) * sv + t];
        if (ok[m.off[j] + t] && c <= limit[e]) break;
      }
      next[s] = t;
      if (t == sj) ok[m.off[i] + s] = 0, removed = true;
    }
    if (!removed) continue;
    for (size_t b = m.adj_off[i]; b < m.adj_off[i + 1]; ++b) {
      const int f = m.adj[b];
      if (f == e) continue;
      const int back = 2 * f + (m.edges[f].u == i ? 1 : 0);  // revises f's other end against i
      if (!queued[back]) queued[back] = 1, queue.push_back(back);
    }
  }
  // Bijection edges: every kept strategy on either side has exactly one affordable kept partner.
  std::vector<int> partner_uv;  // per bijection edge, kept s_u -> s_v
  std::vector<int> parent(m.n);
  std::iota(parent.begin(), parent.end(), 0);
  std::vector<char> bij(m.edges.size(), 0);
  std::vector<int> count_v;
  for (size_t e = 0; e < m.edges.size(); ++e) {
    const auto& ed = m.edges[e];
    const int su = m.num_strategies(ed.u), sv = m.num_strategies(ed.v);
    count_v.assign(sv, 0);
    bool good = true;
    for (int s = 0; s < su && good; ++s) {
      if (!ok[m.off[ed.u] + s]) continue;
      int n = 0;
      for (int t = 0; t < sv; ++t)
        if (ok[m.off[ed.v] + t] && affordable(static_cast<int>(e), s, t)) ++n, ++count_v[t];
      good = n == 1;
    }
    for (int t = 0; t < sv && good; ++t) good = !ok[m.off[ed.v] + t] || count_v[t] == 1;
    if (!good) continue;
    bij[e] = 1;
    int a = find(parent, ed.u), b = find(parent, ed.v);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
  // Groups: components of bijection edges, root = smallest node index.
  Coarsening c;
  Model& cm = c.coarse;
  c.group_of.assign(m.n, -1);
  std::vector<std::vector<int>> comp(m.n);
  for (int i = 0; i < m.n; ++i) comp[find(parent, i)].push_back(i);
  cm.off.assign(1, 0);
  c.member_off.assign(1, 0);
  std::vector<int> fine(m.n, -1), seen_stamp(m.n, -1), order;
  int stamp = 0;
  for (int root = 0; root < m.n; ++root) {
    if (comp[root].empty()) continue;
    const auto& mem = comp[root];
    const int g = cm.n++;
    for (int i : mem) c.group_of[i] = g;
    // breadth-first order over bijection edges (root first)
    order.clear();
    order.push_back(root);
    ++stamp;
    seen_stamp[root] = stamp;
    for (size_t h = 0; h < order.size(); ++h) {
      int i = order[h];
      for (size_t a = m.adj_off[i]; a < m.adj_off[i + 1]; ++a) {
        int e = m.adj[a];
        if (!bij[e]) continue;
        int j = m.edges[e].u == i ? m.edges[e].v : m.edges[e].u;
        if (seen_stamp[j] != stamp) seen_stamp[j] = stamp, order.push_back(j);
      }
    }
    if (order.size() != mem.size()) throw std::logic_error("coarsen: group traversal mismatch");
    const size_t slot0 = c.members.size();
    for (int i : order) {
      c.members.push_back(i);
      c.map_off.push_back(0);
    }
    std::vector<std::vector<int>> maps(order.size());
    for (int r0 = 0; r0 < m.num_strategies(root); ++r0) {
      if (!ok[m.off[root] + r0]) continue;
      // propagate the root's strategy along bijection edges
      for (int i : order) fine[i] = -1;
      fine[root] = r0;
      bool consistent = true;
      for (size_t h = 0; h < order.size() && consistent; ++h) {
        int i = order[h];
        for (size_t a = m.adj_off[i]; a < m.adj_off[i + 1] && consistent; ++a) {
          int e = m.adj[a];
          if (c.group_of[m.edges[e].u] != g || c.group_of[m.edges[e].v] != g) continue;
          int j = m.edges[e].u == i ? m.edges[e].v : m.edges[e].u;
          if (bij[e]) {
            int t = -1;
            for (int q = 0; q < m.num_strategies(j) && t < 0; ++q)
              if (ok[m.off[j] + q] && (m.edges[e].u == i ? affordable(e, fine[i], q) : affordable(e, q, fine[i]))) t = q;
            if (t < 0) consistent = false;
            else if (fine[j] < 0) fine[j] = t;
            else if (fine[j] != t) consistent = false;
          }
        }
      }
      if (!consistent) continue;
      // internal cost: members' costs plus every edge inside the group
      Cost total = 0;
      for (int i : order) total = sat_add(total, m.cost[m.off[i] + fine[i]]);
      for (int i : order)
        for (size_t a = m.adj_off[i]; a < m.adj_off[i + 1]; ++a) {
          int e = m.adj[a];
          const auto& ed = m.edges[e];
          if (ed.u != i || c.group_of[ed.v] != g) continue;  // count each internal edge once
          total = sat_add(total, entry(m, e, fine[ed.u], fine[ed.v]));
        }
      if (total == kInfiniteCost) continue;
      cm.strat.push_back(r0);
      cm.cost.push_back(total);
      for (size_t h = 0; h < order.size(); ++h) maps[h].push_back(fine[order[h]]);
    }
    if (cm.strat.size() == cm.off.back()) throw std::logic_error("coarsen: a group kept no strategy (ub is not a labelling's cost)");
    cm.off.push_back(cm.strat.size());
    for (size_t h = 0; h < order.size(); ++h) {
      c.map_off[slot0 + h] = c.map.size();
      c.map.insert(c.map.end(), maps[h].begin(), maps[h].end());
    }
    c.member_off.push_back(c.members.size());
    if (order.size() > 1) c.grouped_nodes += static_cast<int>(order.size());
  }
  if (Clock::now() >= deadline) throw CoarsenTimeout();
  build_coarse_edges(m, c, deadline);
  // The same affordability test on the coarse model: its sums are tighter
  // than the fine minima, and the MILP then never sees huge coefficients.
  const Minima cmn = minima_of(cm);
  const __int128 clb = cmn.sum;
  const std::vector<Cost>& gmin = cmn.node;
  const std::vector<Cost>& emin = cmn.edge;
  for (int g = 0; g < cm.n; ++g)
    for (size_t k = cm.off[g]; k < cm.off[g + 1]; ++k)
      if (clb - gmin[g] + cm.cost[k] > ub) cm.cost[k] = kHugeCost;
  // Edges sharing a block have equal minima, so equal limits: each block once.
  std::unordered_set<size_t> pruned;
  for (size_t e = 0; e < cm.edges.size(); ++e) {
    const auto& ed = cm.edges[e];
    if (!pruned.insert(ed.off).second) continue;
    const size_t cells = static_cast<size_t>(cm.num_strategies(ed.u)) * cm.num_strategies(ed.v);
    const Cost lim = clamp_limit(ub - clb + emin[e]);
    Cost* mat = &cm.mat[ed.off];
    for (size_t k = 0; k < cells; ++k)
      if (mat[k] > lim) mat[k] = kInfiniteCost;
  }
  return c;
}

}  // namespace tlm::solver
