// Optimum-preserving reductions: see model.h for what they may do and why.
#include <algorithm>
#include <deque>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/solver/cost_math.h"
#include "core/solver/matrix_pool.h"
#include "core/solver/model.h"
#include "core/solver/slack_tree.h"
#include "core/solver/solver.h"
#include "core/solver/trace.h"

namespace tlm::solver {
namespace {

constexpr Cost INF = kInfiniteCost;

// Why strategies of a node were removed; named when a node ends up with none.
enum Cause : unsigned { kPinned = 1, kBounds = 2, kForbidden = 4, kMemory = 8, kNeighbour = 16 };

struct WorkEdge {
  int u = 0, v = 0;
  CostMatrix m;  // |S_u| x |S_v| over problem strategy indices; shared with the problem until summed
  bool alive = true;
};

class Reducer {
 public:
  Reducer(const Problem& p, Reduction& out, bool eliminate, Clock::time_point deadline)
      : p_(p), out_(out), eliminate_(eliminate), deadline_(deadline) {}

  void run() {
    init_nodes();
    init_edges();
    trace("reduce: nodes and edges");
    init_memory();
    trace("reduce: memory");
    for (int i = 0; i < n_; ++i) push(i);
    for (int round = 0; round < 50 && Clock::now() < deadline_; ++round) {
      drain();
      trace("reduce: round %d drained", round);
      bool changed = memory_round();
      trace("reduce: round %d memory %d", round, (int)changed);
      if (!changed) changed = dominance_round();
      trace("reduce: round %d dominance %d", round, (int)changed);
      if (!changed && queue_.empty()) break;
    }
    drain();
    trace("reduce: drained");
    build_model();
  }

 private:
  const Problem& p_;
  Reduction& out_;
  bool eliminate_;
  int n_ = 0;
  std::vector<std::vector<Cost>> un_;
  std::vector<std::vector<Usage>> res_;
  std::vector<int> alive_;
  std::vector<char> active_;
  std::vector<unsigned> causes_;
  std::vector<int> cause_neighbour_;
  std::vector<WorkEdge> edges_;
  std::vector<std::vector<int>> adj_;
  std::unordered_map<uint64_t, int> pair_edge_;
  // (matrix, its rows) -> (that matrix, its transpose), while init_edges runs
  std::map<std::pair<const std::vector<Cost>*, int>, std::pair<CostMatrix, CostMatrix>> transposed_;
  std::deque<int> queue_;
  std::vector<char> queued_;
  // memory check points (starts of nodes that use memory)
  bool limited_ = false;
  std::vector<int64_t> times_;
  std::vector<int> pa_, pb_;
  SlackTree cap_;
  size_t removed_ = 0, fixed_count_ = 0, elim_count_ = 0;
  std::vector<char> dom_dirty_;  // node needs a (new) dominance check
  Clock::time_point deadline_;

  int S(int i) const { return static_cast<int>(un_[i].size()); }

  void push(int i) {
    if (!dom_dirty_.empty()) dom_dirty_[i] = 1;
    if (active_[i] && !queued_[i]) {
      queued_[i] = 1;
      queue_.push_back(i);
    }
  }

  std::string node_desc(int i) const {
    const Node& nd = p_.nodes[i];
    return "node " + std::to_string(i) + " (live [" + std::to_string(nd.start) + ", " + std::to_string(nd.end) + "))";
  }

  [[noreturn]] void no_strategy_left(int i) {
    std::string why;
    auto add = [&](const std::string& s) { why += (why.empty() ? "" : "; ") + s; };
    const Node& nd = p_.nodes[i];
    if (causes_[i] & kPinned) add("pinned to strategy " + std::to_string(nd.pinned));
    if (causes_[i] & kBounds)
      add("usage bounds [" + (nd.usage_lower ? std::to_string(*nd.usage_lower) : std::string("-inf")) + ", " +
          (nd.usage_upper ? std::to_string(*nd.usage_upper) : std::string("inf")) + "]");
    if (causes_[i] & kForbidden) add("infinite node costs");
    if (causes_[i] & kMemory) add("usage_limit " + std::to_string(*p_.usage_limit) + " during its live range");
    if (causes_[i] & kNeighbour)
      add("forbidden edge/coupling entries with node " + std::to_string(cause_neighbour_[i]) +
          " (and the constraints of its neighbours)");
    throw InfeasibleError("infeasible: " + node_desc(i) + " has no strategy satisfying " +
                          (why.empty() ? std::string("its constraints") : why));
  }

  void remove(int i, int s, Cause cause, int neighbour = -1) {
    if (un_[i][s] == INF) return;
    un_[i][s] = INF;
    --alive_[i];
    ++removed_;
    causes_[i] |= cause;
    if (neighbour >= 0) cause_neighbour_[i] = neighbour;
    if (alive_[i] == 0) no_strategy_left(i);
    push(i);
    for (int e : adj_[i])
      if (edges_[e].alive) push(edges_[e].u == i ? edges_[e].v : edges_[e].u);
  }

  void init_nodes() {
    n_ = static_cast<int>(p_.nodes.size());
    un_.resize(n_);
    res_.resize(n_);
    alive_.assign(n_, 0);
    active_.assign(n_, 1);
    queued_.assign(n_, 0);
    causes_.assign(n_, 0);
    cause_neighbour_.assign(n_, -1);
    adj_.resize(n_);
    out_.fixed.assign(n_, -1);
    for (int i = 0; i < n_; ++i) {
      const Node& nd = p_.nodes[i];
      int k = static_cast<int>(nd.strategies.size());
      un_[i].resize(k);
      res_[i].resize(k);
      for (int s = 0; s < k; ++s) {
        const Strategy& st = nd.strategies[s];
        un_[i][s] = st.cost;
        res_[i][s] = st.usage;
        unsigned c = 0;
        if (st.cost == INF) c = kForbidden;
        else if (nd.pinned >= 0 && s != nd.pinned) c = kPinned;
        else if ((nd.usage_lower && st.usage < *nd.usage_lower) || (nd.usage_upper && st.usage > *nd.usage_upper)) c = kBounds;
        if (c) {
          un_[i][s] = INF;
          causes_[i] |= c;
          ++removed_;
        } else {
          ++alive_[i];
        }
      }
      if (alive_[i] == 0) no_strategy_left(i);
    }
  }

  void add_edge(int u, int v, std::vector<Cost> m) { add_edge(u, v, make_cost_matrix(std::move(m))); }

  // Matrices are shared (problem.h): transposing or summing makes a new one.
  void add_edge(int u, int v, CostMatrix m) {
    if (u > v) {  // store with u < v so parallel edges meet under one key
      const int su = S(u), sv = S(v);
      // Shared matrices stay shared transposed (recompute's edges from need nodes to the
      // hold nodes before them: thousands of edges, a few matrices).
      auto& [source, t] = transposed_[{m.get(), su}];
      if (!t) {
        source = m;  // keeps the key's address from being reused while cached
        std::vector<Cost> dense(m->size());
        for (int a = 0; a < su; ++a)
          for (int b = 0; b < sv; ++b) dense[static_cast<size_t>(b) * su + a] = (*m)[static_cast<size_t>(a) * sv + b];
        t = make_cost_matrix(std::move(dense));
      }
      m = t;
      std::swap(u, v);
    }
    uint64_t key = (static_cast<uint64_t>(u) << 32) | static_cast<uint32_t>(v);
    auto it = pair_edge_.find(key);
    if (it != pair_edge_.end() && edges_[it->second].alive) {
      CostMatrix& dst = edges_[it->second].m;
      std::vector<Cost> sum(*dst);
      for (size_t k = 0; k < sum.size(); ++k) sum[k] = sat_add(sum[k], (*m)[k]);
      dst = make_cost_matrix(std::move(sum));
    } else {
      int id = static_cast<int>(edges_.size());
      edges_.push_back({u, v, std::move(m), true});
      pair_edge_[key] = id;
      adj_[u].push_back(id);
      adj_[v].push_back(id);
    }
    push(u);
    push(v);
  }

  void init_edges() {
    for (const Edge& e : p_.edges) add_edge(e.u, e.v, e.costs);
    // A coupling is an edge of 0 where its map says and INF elsewhere. Couplings repeat the
    // same few maps (recompute's hold and tail nodes: one per value, the same map for every
    // value of S strategies), and their dense matrices are what init spends its time and
    // memory on at scale (2 S^2 entries each): one matrix per map, and add_edge's transposes
    // of it are shared too.
    std::map<std::tuple<int, int, std::vector<int>>, CostMatrix> matrix_of;
    for (const Coupling& c : p_.couplings) {
      const int su = S(c.u), sv = S(c.v);
      CostMatrix& m = matrix_of[{su, sv, c.map}];
      if (!m) {
        std::vector<Cost> dense(static_cast<size_t>(su) * sv, INF);
        for (int a = 0; a < su; ++a)
          if (c.map[a] >= 0) dense[static_cast<size_t>(a) * sv + c.map[a]] = 0;
        m = make_cost_matrix(std::move(dense));
      }
      add_edge(c.u, c.v, m);
    }
    transposed_.clear();
  }

  void init_memory() {
    limited_ = p_.usage_limit.has_value();
    pa_.assign(n_, 0);
    pb_.assign(n_, 0);
    if (limited_) {
      for (int i = 0; i < n_; ++i) {
        const Node& nd = p_.nodes[i];
        Usage mx = 0;
        for (int s = 0; s < S(i); ++s)
          if (un_[i][s] != INF) mx = std::max(mx, res_[i][s]);
        if (nd.start < nd.end && mx > 0) times_.push_back(nd.start);
      }
      std::sort(times_.begin(), times_.end());
      times_.erase(std::unique(times_.begin(), times_.end()), times_.end());
    }
    for (int i = 0; i < n_; ++i) {
      const Node& nd = p_.nodes[i];
      if (limited_ && nd.start < nd.end) {
        pa_[i] = static_cast<int>(std::lower_bound(times_.begin(), times_.end(), nd.start) - times_.begin());
        pb_[i] = static_cast<int>(std::lower_bound(times_.begin(), times_.end(), nd.end) - times_.begin());
      }
      if (pa_[i] >= pb_[i]) {  // never counted: its usage is irrelevant
        pa_[i] = pb_[i] = 0;
        std::fill(res_[i].begin(), res_[i].end(), 0);
      }
    }
    std::vector<__int128> init(times_.size(), limited_ ? static_cast<__int128>(*p_.usage_limit) : 0);
    cap_.build(init);
    if (limited_) memory_round();
  }

  // Moves each node's smallest residual usage into the fixed load, then drops
  // strategies whose residual exceeds what is left anywhere in the node's range.
  bool memory_round() {
    if (!limited_ || times_.empty()) return false;
    bool changed = false;
    for (int pass = 0; pass < 20; ++pass) {
      bool moved = false;
      for (int i = 0; i < n_; ++i) {
        if (!active_[i] || pa_[i] >= pb_[i]) continue;
        Usage r = std::numeric_limits<Usage>::max();
        for (int s = 0; s < S(i); ++s)
          if (un_[i][s] != INF) r = std::min(r, res_[i][s]);
        if (r > 0) {
          cap_.add(pa_[i], pb_[i], -static_cast<__int128>(r));
          for (auto& x : res_[i]) x -= r;
          moved = true;
        }
      }
      if (cap_.global_min() < 0) memory_infeasible();
      bool pruned = false;
      for (int i = 0; i < n_; ++i) {
        if (!active_[i] || pa_[i] >= pb_[i]) continue;
        __int128 slack = cap_.min(pa_[i], pb_[i]);
        for (int s = 0; s < S(i); ++s)
          if (un_[i][s] != INF && res_[i][s] > slack) {
            remove(i, s, kMemory);
            pruned = true;
          }
      }
      changed |= moved || pruned;
      if (!pruned) break;
    }
    return changed;
  }

  [[noreturn]] void memory_infeasible() {
    size_t k = cap_.argmin();
    __int128 need = static_cast<__int128>(*p_.usage_limit) - cap_.value(k);
    int alive = 0;
    for (int i = 0; i < n_; ++i) {
      const Node& nd = p_.nodes[i];
      if (nd.start <= times_[k] && times_[k] < nd.end) ++alive;
    }
    throw InfeasibleError("infeasible: usage_limit " + std::to_string(*p_.usage_limit) + " at time " +
                          std::to_string(times_[k]) + " is below the smallest possible usage there, " +
                          to_string(need) + " (the " + std::to_string(alive) +
                          " nodes live at that time, each at its smallest allowed usage)");
  }

  int degree(int i) {
    auto& a = adj_[i];
    a.erase(std::remove_if(a.begin(), a.end(), [&](int e) { return !edges_[e].alive; }), a.end());
    return static_cast<int>(a.size());
  }

  Cost at(const WorkEdge& e, int su, int sv) const { return (*e.m)[static_cast<size_t>(su) * S(e.v) + sv]; }
  // Entry with the strategy of `i` first, whichever side of the edge i is on.
  Cost at_from(const WorkEdge& e, int i, int si, int sj) const {
    return e.u == i ? at(e, si, sj) : at(e, sj, si);
  }

  void arc_consistency(int i) {
    for (size_t k = 0; k < adj_[i].size(); ++k) {
      const WorkEdge& e = edges_[adj_[i][k]];
      if (!e.alive) continue;
      int j = e.u == i ? e.v : e.u;
      for (int s = 0; s < S(i); ++s) {
        if (un_[i][s] == INF) continue;
        bool ok = false;
        for (int t = 0; t < S(j) && !ok; ++t) ok = un_[j][t] != INF && at_from(e, i, s, t) != INF;
        if (!ok) remove(i, s, kNeighbour, j);
      }
    }
  }

  int only_strategy(int i) const {
    for (int s = 0; s < S(i); ++s)
      if (un_[i][s] != INF) return s;
    return -1;
  }

  // Node i keeps one strategy: its cost and its edge rows move elsewhere.
  void fix(int i, int s) {
    for (int t = 0; t < S(i); ++t)
      if (t != s && un_[i][t] != INF) {
        un_[i][t] = INF;
        --alive_[i];
      }
    out_.offset_add(un_[i][s]);
    if (pa_[i] < pb_[i] && res_[i][s] > 0) cap_.add(pa_[i], pb_[i], -static_cast<__int128>(res_[i][s]));
    for (int e : adj_[i]) {
      WorkEdge& we = edges_[e];
      if (!we.alive) continue;
      we.alive = false;
      int j = we.u == i ? we.v : we.u;
      for (int t = 0; t < S(j); ++t) {
        if (un_[j][t] == INF) continue;
        un_[j][t] = sat_add(un_[j][t], at_from(we, i, s, t));
        if (un_[j][t] == INF) {
          un_[j][t] = 0;  // so remove() sees it alive and counts it
          remove(j, t, kNeighbour, i);
        }
      }
      push(j);
    }
    active_[i] = 0;
    out_.fixed[i] = s;
    ++fixed_count_;
  }

  bool memory_free(int i) const {
    for (int s = 0; s < S(i); ++s)
      if (un_[i][s] != INF && res_[i][s] != 0) return false;
    return true;
  }

  // Degree-1 node v: fold min over s_v into u when the minimum is reachable
  // with zero residual usage (then v never needs more memory than its least).
  bool eliminate_leaf(int v) {
    const WorkEdge& e = edges_[adj_[v][0]];
    int u = e.u == v ? e.v : e.u;
    std::vector<int> choice(S(u), -1);
    std::vector<Cost> add(S(u), INF);
    for (int su = 0; su < S(u); ++su) {
      if (un_[u][su] == INF) continue;
      Cost best = INF, best0 = INF;
      int arg0 = -1;
      for (int sv = 0; sv < S(v); ++sv) {
        if (un_[v][sv] == INF) continue;
        Cost c = sat_add(at_from(e, u, su, sv), un_[v][sv]);
        best = std::min(best, c);
        if (res_[v][sv] == 0 && c < best0) best0 = c, arg0 = sv;
      }
      if (best0 != best) return false;
      choice[su] = arg0;
      add[su] = best0;
    }
    edges_[adj_[v][0]].alive = false;
    active_[v] = 0;
    for (int su = 0; su < S(u); ++su) {
      if (un_[u][su] == INF) continue;
      un_[u][su] = sat_add(un_[u][su], add[su]);
      if (un_[u][su] == INF) {
        un_[u][su] = 0;
        remove(u, su, kNeighbour, v);
      }
    }
    out_.eliminated.push_back({v, u, -1, 1, std::move(choice)});
    ++elim_count_;
    push(u);
    return true;
  }

  // Degree-2 node v between u and w: replace it by one u-w edge of
  // min over s_v, under the same zero-residual condition.
  bool eliminate_middle(int v) {
    const WorkEdge& e1 = edges_[adj_[v][0]];
    const WorkEdge& e2 = edges_[adj_[v][1]];
    int u = e1.u == v ? e1.v : e1.u;
    int w = e2.u == v ? e2.v : e2.u;
    size_t work = static_cast<size_t>(alive_[u]) * alive_[w] * alive_[v];
    if (work > 4000000 || static_cast<size_t>(S(u)) * S(w) > 200000) return false;
    std::vector<int> av;
    for (int s = 0; s < S(v); ++s)
      if (un_[v][s] != INF) av.push_back(s);
    std::vector<Cost> m(static_cast<size_t>(S(u)) * S(w), INF);
    std::vector<int> choice(m.size(), -1);
    for (int su = 0; su < S(u); ++su) {
      if (un_[u][su] == INF) continue;
      for (int sw = 0; sw < S(w); ++sw) {
        if (un_[w][sw] == INF) continue;
        Cost best = INF, best0 = INF;
        int arg0 = -1;
        for (int sv : av) {
          Cost c = sat_add(sat_add(at_from(e1, u, su, sv), un_[v][sv]), at_from(e2, w, sw, sv));
          best = std::min(best, c);
          if (res_[v][sv] == 0 && c < best0) best0 = c, arg0 = sv;
        }
        if (best0 != best) return false;
        m[static_cast<size_t>(su) * S(w) + sw] = best0;
        choice[static_cast<size_t>(su) * S(w) + sw] = arg0;
      }
    }
    edges_[adj_[v][0]].alive = false;
    edges_[adj_[v][1]].alive = false;
    active_[v] = 0;
    out_.eliminated.push_back({v, u, w, S(w), std::move(choice)});
    ++elim_count_;
    add_edge(u, w, std::move(m));
    return true;
  }

  // Past the deadline eliminations stop (they are the costly part: |S_u| x
  // |S_v| x |S_w| per middle node, seconds on 3-D meshes); consistency and
  // fixing go on, so the model is smaller, never wrong.
  void drain() {
    bool late = false;
    for (size_t pops = 0; !queue_.empty(); ++pops) {
      if ((pops & 63) == 0 && !late) late = Clock::now() > deadline_;
      int i = queue_.front();
      queue_.pop_front();
      queued_[i] = 0;
      if (!active_[i]) continue;
      arc_consistency(i);
      if (alive_[i] == 1) {
        fix(i, only_strategy(i));
        continue;
      }
      int d = degree(i);
      bool free = memory_free(i);
      if (d == 0 && free) {
        int best = -1;
        for (int s = 0; s < S(i); ++s)
          if (un_[i][s] != INF && (best < 0 || un_[i][s] < un_[i][best])) best = s;
        fix(i, best);
        continue;
      }
      if (!eliminate_ || late) continue;
      if (d == 1) eliminate_leaf(i);
      else if (d == 2 && free) eliminate_middle(i);
    }
  }

  // Strategy a of node i is dominated by b when b never costs more in any
  // neighbourhood (cost difference plus the worst edge-row difference per
  // edge <= 0) and never uses more memory. Ties keep the lower index.
  // Only nodes whose neighbourhood changed since their last check are
  // examined again; the pass stops at the deadline (the reduction is only
  // weaker then, never wrong).
  bool dominance_round() {
    bool changed = false;
    std::vector<int> alive_list;
    std::vector<Cost> rows;          // per incident edge: |alive_i| x |alive_j| entries, i's strategy first
    std::vector<size_t> row_off;     // per incident edge
    std::vector<int> row_width;
    if (dom_dirty_.empty()) dom_dirty_.assign(n_, 1);
    for (int i = 0; i < n_; ++i) {
      if ((i & 255) == 0 && Clock::now() > deadline_) break;
      if (!active_[i] || alive_[i] < 2 || !dom_dirty_[i]) continue;
      dom_dirty_[i] = 0;
      int d = degree(i);
      size_t nb = 0;
      for (int e : adj_[i]) nb += alive_[edges_[e].u == i ? edges_[e].v : edges_[e].u];
      if (static_cast<size_t>(alive_[i]) * alive_[i] * (nb + 1) > 3000000) continue;
      alive_list.clear();
      for (int s = 0; s < S(i); ++s)
        if (un_[i][s] != INF) alive_list.push_back(s);
      const int na = static_cast<int>(alive_list.size());
      rows.clear();
      row_off.assign(d, 0);
      row_width.assign(d, 0);
      for (int k = 0; k < d; ++k) {
        const WorkEdge& e = edges_[adj_[i][k]];
        int j = e.u == i ? e.v : e.u;
        row_off[k] = rows.size();
        for (int ai = 0; ai < na; ++ai)
          for (int t = 0; t < S(j); ++t)
            if (un_[j][t] != INF) rows.push_back(at_from(e, i, alive_list[ai], t));
        row_width[k] = static_cast<int>((rows.size() - row_off[k]) / std::max(na, 1));
      }
      std::vector<char> gone(na, 0);
      for (int ai = 0; ai < na; ++ai) {
        const int a = alive_list[ai];
        for (int bi = 0; bi < na; ++bi) {
          const int b = alive_list[bi];
          if (bi == ai || gone[bi] || res_[i][b] > res_[i][a]) continue;
          __int128 diff = static_cast<__int128>(un_[i][b]) - un_[i][a];
          bool ok = true;
          for (int k = 0; k < d && ok; ++k) {
            const int w = row_width[k];
            const Cost* ra = &rows[row_off[k] + static_cast<size_t>(ai) * w];
            const Cost* rb = &rows[row_off[k] + static_cast<size_t>(bi) * w];
            __int128 worst = -(static_cast<__int128>(1) << 100);
            for (int t = 0; t < w; ++t) {
              if (ra[t] == INF) continue;
              if (rb[t] == INF) { ok = false; break; }
              worst = std::max(worst, static_cast<__int128>(rb[t]) - ra[t]);
            }
            if (ok && worst > -(static_cast<__int128>(1) << 100)) diff += worst;
          }
          if (!ok || diff > 0) continue;
          if (diff == 0 && res_[i][b] == res_[i][a] && b > a) continue;  // exact tie: keep the lower index
          gone[ai] = 1;
          remove(i, a, kNeighbour);
          changed = true;
          break;
        }
      }
    }
    return changed;
  }

  void build_model() {
    Model& m = out_.model;
    std::vector<int> index(n_, -1);
    for (int i = 0; i < n_; ++i)
      if (active_[i]) {
        index[i] = m.n++;
        m.orig.push_back(i);
      }
    m.off.assign(1, 0);
    std::vector<std::vector<int>> local(n_);  // problem strategy -> model strategy
    std::vector<Usage> max_res(m.n, 0);
    for (int k = 0; k < m.n; ++k) {
      int i = m.orig[k];
      local[i].assign(S(i), -1);
      for (int s = 0; s < S(i); ++s) {
        if (un_[i][s] == INF) continue;
        local[i][s] = static_cast<int>(m.strat.size() - m.off.back());
        m.strat.push_back(s);
        m.cost.push_back(un_[i][s]);
        m.usage.push_back(res_[i][s]);
        max_res[k] = std::max(max_res[k], res_[i][s]);
      }
      m.off.push_back(m.strat.size());
    }
    std::vector<std::vector<int>> adj(m.n);
    MatrixPool pool(m.mat);  // identical matrices stored once (matrix_pool.h)
    // A shared problem matrix between nodes that kept the same strategies
    // gives the same block: cut and pool it once per (matrix, kept sets)
    // instead of once per edge (tens of millions of entries on 3-D meshes).
    std::vector<int> kept_set(n_, -1);
    {
      std::map<std::vector<int>, int> sets;
      for (int k = 0; k < m.n; ++k)
        kept_set[m.orig[k]] = sets.emplace(local[m.orig[k]], static_cast<int>(sets.size())).first->second;
    }
    std::map<std::tuple<const std::vector<Cost>*, int, int>, size_t> block_of;
    std::vector<Cost> block;
    for (const WorkEdge& e : edges_) {
      if (!e.alive) continue;
      const auto key = std::make_tuple(e.m.get(), kept_set[e.u], kept_set[e.v]);
      auto found = block_of.find(key);
      if (found == block_of.end()) {
        block.clear();
        for (int a = 0; a < S(e.u); ++a) {
          if (local[e.u][a] < 0) continue;
          for (int b = 0; b < S(e.v); ++b)
            if (local[e.v][b] >= 0) block.push_back(at(e, a, b));
        }
        found = block_of.emplace(key, pool.add(block.data(), block.size())).first;
      }
      Model::ModelEdge me{index[e.u], index[e.v], found->second};
      int id = static_cast<int>(m.edges.size());
      m.edges.push_back(me);
      adj[me.u].push_back(id);
      adj[me.v].push_back(id);
    }
    m.adj_off.assign(1, 0);
    for (auto& a : adj) {
      m.adj.insert(m.adj.end(), a.begin(), a.end());
      m.adj_off.push_back(m.adj.size());
    }
    // Memory check points: only those some choice could violate, one per
    // run of points with the same set of live model nodes (keeping the
    // tightest capacity).
    const size_t np = times_.size();
    std::vector<__int128> cap = cap_.values();
    std::vector<__int128> maxload(np + 1, 0);
    std::vector<int> boundary(np + 1, 0);
    for (int k = 0; k < m.n; ++k) {
      int i = m.orig[k];
      if (max_res[k] == 0 || pa_[i] >= pb_[i]) continue;
      maxload[pa_[i]] += max_res[k];
      maxload[pb_[i]] -= max_res[k];
      boundary[pa_[i]] = boundary[pb_[i]] = 1;
    }
    std::vector<int> kept;  // indices into times_
    std::vector<int> group_of(np + 1, -1);
    __int128 load = 0;
    int last_kept = -1;
    bool change_since = true;
    for (size_t k = 0; k < np; ++k) {
      load += maxload[k];
      if (boundary[k]) change_since = true;
      if (load <= cap[k]) continue;  // cannot be violated
      if (!change_since && last_kept >= 0) {
        if (cap[k] < m.cap.back()) { m.cap.back() = static_cast<Usage>(cap[k]); m.point_time.back() = times_[k]; }
      } else {
        kept.push_back(static_cast<int>(k));
        m.cap.push_back(static_cast<Usage>(cap[k]));
        m.point_time.push_back(times_[k]);
        last_kept = static_cast<int>(k);
      }
      change_since = false;
    }
    m.plo.assign(m.n, 0);
    m.phi.assign(m.n, 0);
    for (int k = 0; k < m.n; ++k) {
      int i = m.orig[k];
      if (max_res[k] == 0 || pa_[i] >= pb_[i]) continue;
      m.plo[k] = static_cast<int>(std::lower_bound(kept.begin(), kept.end(), pa_[i]) - kept.begin());
      m.phi[k] = static_cast<int>(std::lower_bound(kept.begin(), kept.end(), pb_[i]) - kept.begin());
    }
    std::ostringstream os;
    os << "reduced " << n_ << " nodes / " << p_.edges.size() << " edges to " << m.n << " / " << m.edges.size()
       << " (fixed " << fixed_count_ << ", eliminated " << elim_count_ << ", strategies removed " << removed_ << ", "
       << m.cap.size() << " memory check points of " << np << ", " << m.mat.size() << " distinct matrix entries)";
    out_.summary = os.str();
  }
};

}  // namespace

void Reduction::offset_add(Cost c) { model.offset += c; }

Solution Reduction::expand(const std::vector<int>& model_x) const {
  Solution x(fixed);
  for (int k = 0; k < model.n; ++k) x[model.orig[k]] = model.strat[model.off[k] + model_x[k]];
  for (auto it = eliminated.rbegin(); it != eliminated.rend(); ++it) {
    size_t idx = static_cast<size_t>(x[it->u]) * (it->w >= 0 ? it->sw_count : 1) + (it->w >= 0 ? x[it->w] : 0);
    x[it->v] = it->choice[idx];
  }
  return x;
}

Reduction reduce(const Problem& problem, bool eliminate, Clock::time_point deadline) {
  validate(problem);
  Reduction out;
  Reducer(problem, out, eliminate, deadline).run();
  return out;
}

}  // namespace tlm::solver
