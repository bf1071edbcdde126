#include "core/solver/spend_slack.h"

#include <algorithm>
#include <utility>

#include "core/solver/slack_tree.h"

namespace tlm::solver {
namespace {

// The problem's edges and couplings by node, built once.
struct Incidence {
  std::vector<std::vector<int>> edges;      // edge ids at each node
  std::vector<std::vector<int>> forces;     // couplings whose u is the node
  std::vector<std::vector<int>> forced_by;  // couplings whose v is the node
  explicit Incidence(const Problem& p)
      : edges(p.nodes.size()), forces(p.nodes.size()), forced_by(p.nodes.size()) {
    for (size_t e = 0; e < p.edges.size(); ++e) {
      edges[static_cast<size_t>(p.edges[e].u)].push_back(static_cast<int>(e));
      if (p.edges[e].v != p.edges[e].u) edges[static_cast<size_t>(p.edges[e].v)].push_back(static_cast<int>(e));
    }
    for (size_t c = 0; c < p.couplings.size(); ++c) {
      forces[static_cast<size_t>(p.couplings[c].u)].push_back(static_cast<int>(c));
      forced_by[static_cast<size_t>(p.couplings[c].v)].push_back(static_cast<int>(c));
    }
  }
};

// One move: node -> strategy, for a member and the nodes its couplings force.
using Move = std::vector<std::pair<int, int>>;

// The strategy a move gives node n, or -1 when it leaves n alone.
int label_in(const Move& mv, int n) {
  for (const auto& [m, t] : mv)
    if (m == n) return t;
  return -1;
}

// The move of setting `node` to `s` under labelling x, with what couplings force (empty when
// a coupling forbids it, a pinned node would change, or a usage bound breaks).
Move closure(const Problem& p, const Incidence& inc, const Solution& x, int node, int s) {
  Move mv{{node, s}};
  for (size_t k = 0; k < mv.size(); ++k) {
    const auto [n, t] = mv[k];
    const Node& nd = p.nodes[static_cast<size_t>(n)];
    const Strategy& st = nd.strategies[static_cast<size_t>(t)];
    if (st.cost == kInfiniteCost || (nd.pinned >= 0 && t != nd.pinned) ||
        (nd.usage_lower && st.usage < *nd.usage_lower) || (nd.usage_upper && st.usage > *nd.usage_upper))
      return {};
    for (int c : inc.forces[static_cast<size_t>(n)]) {
      const Coupling& cp = p.couplings[static_cast<size_t>(c)];
      const int want = cp.map[static_cast<size_t>(t)];
      if (want < 0) return {};
      const int have = label_in(mv, cp.v);
      if (have >= 0 && have != want) return {};
      if (have < 0 && x[static_cast<size_t>(cp.v)] != want) mv.emplace_back(cp.v, want);
    }
    // A node forced by another: the forcing node must still agree (the move does not turn it).
    for (int c : inc.forced_by[static_cast<size_t>(n)]) {
      const Coupling& cp = p.couplings[static_cast<size_t>(c)];
      const int u = label_in(mv, cp.u);
      if (cp.map[static_cast<size_t>(u >= 0 ? u : x[static_cast<size_t>(cp.u)])] != t) return {};
    }
    if (mv.size() > 64) return {};  // a chain that long is not a member's move
  }
  return mv;
}

// Cost change of a move under x (nullopt-like: `ok` false when it meets a forbidden entry).
__int128 cost_change(const Problem& p, const Incidence& inc, const Solution& x, const Move& mv, bool& ok) {
  auto label = [&](int n) {
    const int t = label_in(mv, n);
    return t >= 0 ? t : x[static_cast<size_t>(n)];
  };
  __int128 d = 0;
  std::vector<int> seen;
  for (const auto& [n, t] : mv) {
    const Node& nd = p.nodes[static_cast<size_t>(n)];
    d += static_cast<__int128>(nd.strategies[static_cast<size_t>(t)].cost) -
         nd.strategies[static_cast<size_t>(x[static_cast<size_t>(n)])].cost;
    for (int e : inc.edges[static_cast<size_t>(n)]) seen.push_back(e);
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int e : seen) {
    const Edge& ed = p.edges[static_cast<size_t>(e)];
    const size_t sv = p.nodes[static_cast<size_t>(ed.v)].strategies.size();
    const Cost now = (*ed.costs)[static_cast<size_t>(x[static_cast<size_t>(ed.u)]) * sv +
                                 static_cast<size_t>(x[static_cast<size_t>(ed.v)])];
    const Cost next = (*ed.costs)[static_cast<size_t>(label(ed.u)) * sv + static_cast<size_t>(label(ed.v))];
    if (next == kInfiniteCost) {
      ok = false;
      return 0;
    }
    d += static_cast<__int128>(next) - now;
  }
  ok = true;
  return d;
}

struct Candidate {
  size_t cls;
  int strategy;
  double per_byte;  // cost change per usage unit added (more negative first); moves adding none first
};

}  // namespace

SlackResult spend_slack(const Problem& p, const std::vector<std::vector<int>>& classes, Solution& x,
                        Clock::time_point deadline) {
  SlackResult out;
  if (!p.usage_limit || classes.empty()) return out;
  const Incidence inc(p);
  int64_t steps = 1;
  for (const Node& nd : p.nodes) steps = std::max(steps, nd.end);
  std::vector<__int128> slack = load_by_step(p, x, static_cast<size_t>(steps));
  slack.pop_back();  // load_by_step's entry at `steps` counts what ends there
  for (__int128& v : slack) v = static_cast<__int128>(*p.usage_limit) - v;
  SlackTree tree(slack);
  auto span = [&](int n) {
    const Node& nd = p.nodes[static_cast<size_t>(n)];
    return std::pair<size_t, size_t>(static_cast<size_t>(std::clamp<int64_t>(nd.start, 0, steps)),
                                     static_cast<size_t>(std::clamp<int64_t>(nd.end, 0, steps)));
  };
  auto usage_of = [&](int n, int s) { return p.nodes[static_cast<size_t>(n)].strategies[static_cast<size_t>(s)].usage; };
  // Usage change of setting node n to strategy t under the current labelling.
  auto delta_usage = [&](int n, int t) {
    return static_cast<__int128>(usage_of(n, t)) - usage_of(n, x[static_cast<size_t>(n)]);
  };

  // Candidates: one member (the middle one) priced under the tied labelling. Gains save cost
  // and add memory (most saved per byte first); frees cost more and free memory (least per
  // byte first), to make room for a gain where the slack is short.
  std::vector<Candidate> gains, frees;
  for (size_t c = 0; c < classes.size() && Clock::now() < deadline; ++c) {
    if (classes[c].size() < 2) continue;
    const int rep = classes[c][classes[c].size() / 2];
    const int have = x[static_cast<size_t>(rep)];
    for (int s = 0; s < static_cast<int>(p.nodes[static_cast<size_t>(rep)].strategies.size()); ++s) {
      if (s == have) continue;
      const Move mv = closure(p, inc, x, rep, s);
      if (mv.empty()) continue;
      bool ok = false;
      const __int128 dc = cost_change(p, inc, x, mv, ok);
      if (!ok || dc == 0) continue;
      double du = 0;
      for (const auto& [n, t] : mv) du += static_cast<double>(delta_usage(n, t));
      if (dc < 0)
        gains.push_back({c, s, du > 0 ? static_cast<double>(dc) / du : -1e300 + static_cast<double>(dc)});
      else if (du < 0)
        frees.push_back({c, s, static_cast<double>(dc) / -du});
    }
  }
  auto order = [](const Candidate& a, const Candidate& b) {
    return a.per_byte != b.per_byte ? a.per_byte < b.per_byte
                                    : std::make_pair(a.cls, a.strategy) < std::make_pair(b.cls, b.strategy);
  };
  std::sort(gains.begin(), gains.end(), order);
  std::sort(frees.begin(), frees.end(), order);

  // How far the move is from fitting: the least, over its nodes adding memory, of the slack
  // left at their steps after it (>= 0: it fits, nodes of one move sharing steps aside).
  auto room = [&](const Move& mv) {
    __int128 least = SlackTree::kBig;
    for (const auto& [n, t] : mv) {
      const __int128 du = delta_usage(n, t);
      if (du <= 0) continue;
      const auto [lo, hi] = span(n);
      least = std::min(least, tree.min(lo, hi) - du);
    }
    return least;
  };
  // Applies a move; returns its inverse.
  auto apply = [&](const Move& mv) {
    Move back;
    for (const auto& [n, t] : mv) {
      const auto [lo, hi] = span(n);
      tree.add(lo, hi, -delta_usage(n, t));
      back.emplace_back(n, x[static_cast<size_t>(n)]);
      x[static_cast<size_t>(n)] = t;
    }
    return back;
  };
  // A gain that does not fit: frees (cheapest per byte first) that raise its room, while
  // their cost stays below its saving; all undone unless the gain then fits at a profit.
  constexpr int kFreeTries = 400;
  auto with_room = [&](const Move& gain) {
    std::vector<Move> undo;
    __int128 spent = 0, need = room(gain);
    int tries = 0;
    bool done = false;
    for (const Candidate& fc : frees) {
      for (auto it = classes[fc.cls].rbegin(); it != classes[fc.cls].rend() && !done && tries < kFreeTries; ++it) {
        ++tries;
        const Move f = closure(p, inc, x, *it, fc.strategy);
        if (f.empty()) continue;
        bool ok = false;
        const __int128 dc = cost_change(p, inc, x, f, ok);
        if (!ok || dc <= 0) continue;
        Move back = apply(f);
        const __int128 now = room(gain);
        bool gain_ok = false;
        const __int128 dg = cost_change(p, inc, x, gain, gain_ok);
        if (now <= need || tree.global_min() < 0 || !gain_ok || spent + dc + dg >= 0) {
          apply(back);
          continue;
        }
        undo.push_back(std::move(back));
        spent += dc;
        need = now;
        if (need >= 0) {
          Move gb = apply(gain);
          if (tree.global_min() >= 0) {
            out.saved -= spent + dg;
            out.moves += static_cast<int>(undo.size()) + 1;
            return true;
          }
          apply(gb);
          done = true;
        }
      }
      if (done || tries >= kFreeTries) break;
    }
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) apply(*it);
    return false;
  };

  // Members one at a time, the last block first (its values live the shortest), each kept
  // when the exact change is a saving and every step it adds memory at keeps its slack.
  for (const Candidate& cd : gains) {
    if (Clock::now() >= deadline) break;
    ++out.candidates;
    const std::vector<int>& members = classes[cd.cls];
    for (auto it = members.rbegin(); it != members.rend() && Clock::now() < deadline; ++it) {
      const Move mv = closure(p, inc, x, *it, cd.strategy);
      if (mv.empty()) continue;
      bool ok = false;
      const __int128 dc = cost_change(p, inc, x, mv, ok);
      if (!ok || dc >= 0) continue;
      if (room(mv) >= 0) {
        Move back = apply(mv);
        if (tree.global_min() >= 0) {  // nodes of one move that share steps fit together too
          out.saved -= dc;
          ++out.moves;
          continue;
        }
        apply(back);
      }
      with_room(mv);
    }
  }
  return out;
}

}  // namespace tlm::solver
