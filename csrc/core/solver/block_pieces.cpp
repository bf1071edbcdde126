#include "core/solver/block_pieces.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

namespace tlm::solver {
namespace {

// a + b, forbidden when either is; a sum past the int64 range is capped just below the
// forbidden marker, which only lowers a term of a lower bound.
Cost add_capped(Cost a, Cost b) {
  if (a == kInfiniteCost || b == kInfiniteCost) return kInfiniteCost;
  Cost out = 0;
  if (__builtin_add_overflow(a, b, &out) || out == kInfiniteCost) return kInfiniteCost - 1;
  return out;
}

uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ULL;
}

// Edge matrices numbered by content, so that blocks whose edges hold equal matrices in
// different objects still compare equal.
class MatrixIds {
 public:
  int id(const std::vector<Cost>* m) {
    auto it = by_pointer_.find(m);
    if (it != by_pointer_.end()) return it->second;
    uint64_t h = m->size();
    for (Cost c : *m) h = mix(h, static_cast<uint64_t>(c));
    int found = -1;
    auto [lo, hi] = by_hash_.equal_range(h);
    for (auto j = lo; j != hi && found < 0; ++j)
      if (*matrices_[static_cast<size_t>(j->second)] == *m) found = j->second;
    if (found < 0) {
      found = static_cast<int>(matrices_.size());
      matrices_.push_back(m);
      by_hash_.emplace(h, found);
    }
    by_pointer_.emplace(m, found);
    return found;
  }

 private:
  std::unordered_map<const std::vector<Cost>*, int> by_pointer_;
  std::unordered_multimap<uint64_t, int> by_hash_;
  std::vector<const std::vector<Cost>*> matrices_;
};

// An edge inside one piece, oriented so that u precedes v (local indices); `matrix` is
// |S_u| x |S_v| of the problem's orientation, read transposed when `transposed`.
struct PieceEdge {
  int u = 0, v = 0;
  int id = 0;  // content id (MatrixIds)
  bool transposed = false;
  const std::vector<Cost>* matrix = nullptr;
  bool operator<(const PieceEdge& o) const {
    return std::tie(u, v, id, transposed) < std::tie(o.u, o.v, o.id, o.transposed);
  }
};

// A node of a piece: one of its own, or a copy of another piece's node that an edge into
// this piece reads. Lagrangian terms tie each copy to its source: `terms` lists the
// agreement keys whose multipliers the node's potentials carry, with their coefficients
// (+1 on a copy, minus the number of its copies on a source).
struct LocalNode {
  int source = 0;  // the problem node
  bool copy = false;
  std::vector<std::pair<int, int>> terms;
};

struct Piece {
  std::vector<LocalNode> nodes;  // own nodes ascending, then copies
  std::vector<PieceEdge> edges;
  std::vector<int64_t> shape;  // everything that decides the piece's minimum, for comparison
  uint64_t hash = 0;
};

// Each node's least usage over its allowed strategies (0 for a node alive at no step).
std::vector<Usage> least_usages(const Problem& p, const std::vector<std::vector<Cost>>& unary) {
  std::vector<Usage> least(p.nodes.size(), 0);
  for (size_t v = 0; v < p.nodes.size(); ++v) {
    const Node& node = p.nodes[v];
    if (node.start >= node.end) continue;
    bool any = false;
    for (size_t s = 0; s < node.strategies.size(); ++s)
      if (unary[v][s] != kInfiniteCost)
        least[v] = any ? std::min(least[v], node.strategies[s].usage) : node.strategies[s].usage, any = true;
  }
  return least;
}

// The load at each step t < `steps` when every node uses `least` (intervals end by `steps`).
std::vector<__int128> least_load_by_step(const Problem& p, const std::vector<Usage>& least, size_t steps) {
  std::vector<__int128> load(steps + 1, 0);
  for (size_t v = 0; v < p.nodes.size(); ++v) {
    const Node& node = p.nodes[v];
    if (node.start >= node.end) continue;
    load[static_cast<size_t>(std::max<int64_t>(node.start, 0))] += least[v];
    load[static_cast<size_t>(node.end)] -= least[v];
  }
  __int128 run = 0;
  for (size_t t = 0; t <= steps; ++t) run += load[t], load[t] = run;
  load.pop_back();
  return load;
}

// Forbids every strategy that alone breaks the limit: its node's usage with it, plus the
// least every other node alive with it can use, is over the limit at some step of its
// interval. No feasible labelling uses one, and the relaxation prices memory at the kept
// steps only, so without this it would choose such strategies freely between them (a
// layer all replicated). Twice: forbidding raises some nodes' least usage.
void forbid_what_cannot_fit(const Problem& p, Usage limit, std::vector<std::vector<Cost>>& unary) {
  int64_t horizon = 0;
  for (const Node& node : p.nodes) horizon = std::max(horizon, node.end);
  const size_t steps = static_cast<size_t>(std::max<int64_t>(horizon, 0)) + 1;
  for (int round = 0; round < 2; ++round) {
    const std::vector<Usage> least = least_usages(p, unary);
    const std::vector<__int128> load = least_load_by_step(p, least, steps);
    // Room left at each step when everything alive uses its least; a sparse table of minima.
    std::vector<std::vector<__int128>> room(1, std::vector<__int128>(steps));
    for (size_t t = 0; t < steps; ++t) room[0][t] = static_cast<__int128>(limit) - load[t];
    for (size_t w = 1; 2 * w <= steps; w *= 2) {
      const std::vector<__int128>& prev = room.back();
      std::vector<__int128> next(steps - 2 * w + 1);
      for (size_t t = 0; t < next.size(); ++t) next[t] = std::min(prev[t], prev[t + w]);
      room.push_back(std::move(next));
    }
    bool changed = false;
    for (size_t v = 0; v < p.nodes.size(); ++v) {
      const Node& node = p.nodes[v];
      if (node.start >= node.end) continue;
      const size_t lo = static_cast<size_t>(std::max<int64_t>(node.start, 0)), hi = static_cast<size_t>(node.end);
      size_t level = 0;
      while ((static_cast<size_t>(2) << level) <= hi - lo) ++level;
      const __int128 least_room = std::min(room[level][lo], room[level][hi - (static_cast<size_t>(1) << level)]);
      for (size_t s = 0; s < node.strategies.size(); ++s)
        if (unary[v][s] != kInfiniteCost && node.strategies[s].usage - least[v] > least_room)
          unary[v][s] = kInfiniteCost, changed = true;
    }
    if (!changed) break;
  }
}

// Gives the nodes at one position of alike blocks the same strategies back after the
// limit's forbidding. The room a strategy is checked against is the least over its node's
// interval, and an early layer's saved values live longer than a late one's, so under a
// tight limit some blocks lost strategies the others kept: their pieces were no longer
// alike, and the bound passed messages over each (70B on 8x8x4 at 60 GiB: 20 distinct
// pieces instead of 6, 108 M matrix entries, 3.3 s to build and one iteration in the
// time left, a 28% gap). A strategy forbidden in one block but kept in another alike
// block is allowed in both: dropping a restriction only relaxes, so the bound stays valid;
// the memory rows still price it. Blocks are alike here when they have as many nodes
// (members, attached parts included) and each position as many strategies.
void allow_alike_across_blocks(const Problem& p, const std::vector<std::vector<int>>& members,
                               const std::vector<std::vector<Cost>>& before_limit,
                               std::vector<std::vector<Cost>>& unary) {
  std::map<std::vector<size_t>, std::vector<size_t>> alike;  // strategy counts by position -> blocks
  for (size_t b = 0; b < members.size(); ++b) {
    std::vector<size_t> shape;
    shape.reserve(members[b].size());
    for (int v : members[b]) shape.push_back(p.nodes[static_cast<size_t>(v)].strategies.size());
    alike[shape].push_back(b);
  }
  for (const auto& [shape, group] : alike) {
    if (group.size() < 2) continue;
    for (size_t k = 0; k < shape.size(); ++k) {
      std::vector<char> kept(shape[k], 0);
      for (size_t b : group) {
        const std::vector<Cost>& u = unary[static_cast<size_t>(members[b][k])];
        for (size_t s = 0; s < kept.size(); ++s) kept[s] = kept[s] || u[s] != kInfiniteCost;
      }
      for (size_t b : group) {
        const size_t v = static_cast<size_t>(members[b][k]);
        for (size_t s = 0; s < kept.size(); ++s)
          if (kept[s] && unary[v][s] == kInfiniteCost) unary[v][s] = before_limit[v][s];
      }
    }
  }
}

// Moves into a block each part of the rest that only that block touches: a connected part
// of the rest (through edges and couplings) whose every link outside it goes to nodes of
// one block, e.g. a layer's own weights and their casts. Their edges into the block then
// stay inside one piece instead of being cut and tied back by agreement multipliers, and
// alike blocks take alike parts, so the piece passed once per iteration holds them all.
// The attached nodes follow the block's own in `members`, in ascending order.
void attach_private_parts(const Problem& p, std::vector<int>& piece_of, std::vector<std::vector<int>>& members) {
  const size_t n = p.nodes.size();
  const int rest = static_cast<int>(members.size());
  std::vector<std::vector<int>> adj(n);
  auto link = [&](int u, int v) {
    if (u == v) return;
    adj[static_cast<size_t>(u)].push_back(v);
    adj[static_cast<size_t>(v)].push_back(u);
  };
  for (const Edge& e : p.edges) link(e.u, e.v);
  for (const Coupling& c : p.couplings) link(c.u, c.v);
  std::vector<char> seen(n, 0);
  std::vector<int> part, stack;
  std::vector<std::vector<int>> attached(members.size());
  for (size_t s = 0; s < n; ++s) {
    if (seen[s] || piece_of[s] != rest) continue;
    part.clear();
    stack.assign(1, static_cast<int>(s));
    seen[s] = 1;
    int touched = -1;  // the one block the part touches; -2: more than one
    while (!stack.empty()) {
      const int u = stack.back();
      stack.pop_back();
      part.push_back(u);
      for (int w : adj[static_cast<size_t>(u)]) {
        const int pw = piece_of[static_cast<size_t>(w)];
        if (pw != rest) {
          touched = touched == -1 || touched == pw ? pw : -2;
        } else if (!seen[static_cast<size_t>(w)]) {
          seen[static_cast<size_t>(w)] = 1;
          stack.push_back(w);
        }
      }
    }
    if (touched < 0) continue;
    for (int u : part) piece_of[static_cast<size_t>(u)] = touched;
    attached[static_cast<size_t>(touched)].insert(attached[static_cast<size_t>(touched)].end(), part.begin(), part.end());
  }
  for (size_t b = 0; b < members.size(); ++b) {
    std::sort(attached[b].begin(), attached[b].end());
    members[b].insert(members[b].end(), attached[b].begin(), attached[b].end());
  }
}

}  // namespace

int64_t BlockPieces::kept_row(int64_t step) const {
  if (step < 0) return -1;
  if (step >= listed) return static_cast<int64_t>(kept.size()) + (step - listed) < static_cast<int64_t>(kept_points)
                                 ? static_cast<int64_t>(kept.size()) + (step - listed)
                                 : -1;
  auto it = std::lower_bound(kept.begin(), kept.end(), step);
  return it != kept.end() && *it == step ? static_cast<int64_t>(it - kept.begin()) : -1;
}

BlockPieces split_into_pieces(const Problem& p, const std::vector<std::vector<int>>& blocks,
                              const std::vector<char>& keep_step, const std::vector<int>& step_block) {
  BlockPieces bp;
  const size_t n = p.nodes.size();
  const int rest = static_cast<int>(blocks.size());
  std::vector<int> piece_of(n, rest);
  for (size_t b = 0; b < blocks.size(); ++b)
    for (int v : blocks[b]) {
      if (v < 0 || static_cast<size_t>(v) >= n || piece_of[static_cast<size_t>(v)] != rest)
        throw std::invalid_argument("block_bound: node " + std::to_string(v) + " is not a node or in two blocks");
      piece_of[static_cast<size_t>(v)] = static_cast<int>(b);
    }
  std::vector<std::vector<int>> members = blocks;
  attach_private_parts(p, piece_of, members);

  // The priced steps, and each node's range of them (as fold_problem squeezes intervals).
  int64_t horizon = 0;
  for (const Node& node : p.nodes) horizon = std::max(horizon, node.end);
  const int64_t listed = static_cast<int64_t>(keep_step.size());
  bp.listed = listed;
  std::vector<int64_t>& kept = bp.kept;
  for (int64_t t = 0; t < listed; ++t)
    if (keep_step[static_cast<size_t>(t)]) kept.push_back(t);
  const size_t points = p.usage_limit ? kept.size() + static_cast<size_t>(std::max<int64_t>(0, horizon - listed)) : 0;
  auto squeeze = [&](int64_t t) {
    if (t >= listed) return static_cast<int64_t>(kept.size()) + (t - listed);
    return static_cast<int64_t>(std::lower_bound(kept.begin(), kept.end(), t) - kept.begin());
  };
  auto uses_memory = [&](size_t v) {
    const Node& node = p.nodes[v];
    return node.start < node.end && std::any_of(node.strategies.begin(), node.strategies.end(),
                                                [](const Strategy& s) { return s.usage != 0; });
  };
  std::vector<int> range_lo(n, 0), range_hi(n, 0);
  if (points > 0)
    for (size_t v = 0; v < n; ++v) {
      if (!uses_memory(v)) continue;
      const Node& node = p.nodes[v];
      range_lo[v] = static_cast<int>(squeeze(node.start));
      range_hi[v] = static_cast<int>(std::min<int64_t>(squeeze(node.end), static_cast<int64_t>(points)));
    }

  // Each node's unary cost in the relaxation: its own, forbidden where a pin, a usage
  // bound, a coupling or the limit rules the strategy out.
  std::vector<std::vector<Cost>> unary(n);
  for (size_t v = 0; v < n; ++v) {
    const Node& node = p.nodes[v];
    unary[v].resize(node.strategies.size());
    for (size_t s = 0; s < node.strategies.size(); ++s) {
      const Strategy& st = node.strategies[s];
      const bool allowed = (node.pinned < 0 || static_cast<int>(s) == node.pinned) &&
                           (!node.usage_lower || st.usage >= *node.usage_lower) &&
                           (!node.usage_upper || st.usage <= *node.usage_upper);
      unary[v][s] = allowed ? st.cost : kInfiniteCost;
    }
  }
  for (const Coupling& c : p.couplings) {
    std::vector<char> reached(p.nodes[static_cast<size_t>(c.v)].strategies.size(), 0);
    for (size_t s = 0; s < c.map.size(); ++s) {
      if (c.map[s] < 0) unary[static_cast<size_t>(c.u)][s] = kInfiniteCost;
      else if (unary[static_cast<size_t>(c.u)][s] != kInfiniteCost) reached[static_cast<size_t>(c.map[s])] = 1;
    }
    for (size_t t = 0; t < reached.size(); ++t)
      if (!reached[t]) unary[static_cast<size_t>(c.v)][t] = kInfiniteCost;
  }
  if (p.usage_limit) {
    const std::vector<std::vector<Cost>> before_limit = unary;
    forbid_what_cannot_fit(p, *p.usage_limit, unary);
    allow_alike_across_blocks(p, members, before_limit, unary);
  }

  // A block's own steps that are not kept (a middle layer's): at each, the block's nodes
  // alive there may use at most the limit less the least that everything else alive there
  // can use. One such row per block and step; the rows of the j-th own step of every block
  // share a multiplier (their sum is a valid row), so blocks alike stay alike, and the
  // row's right-hand side, which differs by block, only enters the bound as a constant.
  // These extra points follow the kept ones; a block node's range of them is `own_lo/hi`.
  std::vector<std::vector<int64_t>> own_steps(blocks.size());
  if (p.usage_limit)
    for (size_t t = 0; t < step_block.size(); ++t) {
      const int b = step_block[t];
      if (b < 0 || static_cast<size_t>(b) >= blocks.size()) continue;
      if (static_cast<int64_t>(t) >= listed || keep_step[t]) continue;  // priced already
      own_steps[static_cast<size_t>(b)].push_back(static_cast<int64_t>(t));
    }
  size_t own_points = 0;
  for (const auto& st : own_steps) own_points = std::max(own_points, st.size());
  const size_t kept_points = points;
  bp.kept_points = kept_points;
  bp.own_points = own_points;
  const size_t all_points = kept_points + own_points;
  std::vector<long double>& rhs = bp.rhs;
  rhs.assign(all_points, p.usage_limit ? static_cast<long double>(*p.usage_limit) : 0.0L);
  std::vector<int> own_lo(n, 0), own_hi(n, 0);
  if (own_points > 0) {
    const std::vector<Usage> least = least_usages(p, unary);
    const std::vector<__int128> least_load =
        least_load_by_step(p, least, std::max(static_cast<size_t>(horizon) + 1, step_block.size()));
    std::vector<std::vector<__int128>> own_diff(blocks.size());
    for (size_t b = 0; b < blocks.size(); ++b) own_diff[b].assign(own_steps[b].size() + 1, 0);
    for (size_t v = 0; v < n; ++v) {
      const Node& node = p.nodes[v];
      if (node.start >= node.end || piece_of[v] == rest) continue;
      const std::vector<int64_t>& st = own_steps[static_cast<size_t>(piece_of[v])];
      const int lo = static_cast<int>(std::lower_bound(st.begin(), st.end(), node.start) - st.begin());
      const int hi = static_cast<int>(std::lower_bound(st.begin(), st.end(), node.end) - st.begin());
      if (lo >= hi) continue;
      own_diff[static_cast<size_t>(piece_of[v])][static_cast<size_t>(lo)] += least[v];
      own_diff[static_cast<size_t>(piece_of[v])][static_cast<size_t>(hi)] -= least[v];
      if (uses_memory(v)) own_lo[v] = static_cast<int>(kept_points) + lo, own_hi[v] = static_cast<int>(kept_points) + hi;
    }
    std::fill(rhs.begin() + static_cast<std::ptrdiff_t>(kept_points), rhs.end(), 0.0L);
    for (size_t b = 0; b < blocks.size(); ++b) {
      __int128 own = 0;
      for (size_t j = 0; j < own_steps[b].size(); ++j) {
        own += own_diff[b][j];
        const __int128 outside = least_load[static_cast<size_t>(own_steps[b][j])] - own;
        rhs[kept_points + j] += static_cast<long double>(static_cast<__int128>(*p.usage_limit) - outside);
      }
    }
  }
  std::vector<Piece> pieces(blocks.size() + 1);
  std::vector<int> local(n, -1);  // a node's index in its own piece
  for (size_t v = 0; v < n; ++v) {
    Piece& pc = pieces[static_cast<size_t>(piece_of[v])];
    local[v] = static_cast<int>(pc.nodes.size());
    pc.nodes.push_back({static_cast<int>(v), false, {}});
  }
  std::vector<int> position(n, -1);  // a block node's index among its block's nodes
  for (const std::vector<int>& b : members)
    for (size_t k = 0; k < b.size(); ++k) position[static_cast<size_t>(b[k])] = static_cast<int>(k);
  // Agreement keys: the copies of one key share one multiplier vector, so that blocks alike
  // stay alike. A node at a block position copied into the block `d` later; a node of the
  // rest copied into a block, by the position of the node reading it there and its rank
  // among that node's sources in the rest (a layer's own cast of its weight sits in the rest
  // as often as a table all layers read); a node at a block position copied into the rest.
  // A key whose width differs from its first copy's falls back to one of its own.
  std::map<std::tuple<int, int, int, int>, int> key_ids;
  std::vector<int>& key_width = bp.key_width;
  std::map<std::pair<int, int>, int> sources_of;  // (holder piece, reading node) -> copies made for it
  auto key_of = [&](size_t u, size_t v) {
    const int pu = piece_of[u], holder = piece_of[v];
    std::tuple<int, int, int, int> key;
    if (pu == rest) key = {1, position[v], sources_of[{holder, static_cast<int>(v)}]++, 0};
    else if (holder == rest) key = {2, position[u], 0, 0};
    else key = {0, position[u], holder - pu, 0};
    const int width = static_cast<int>(unary[u].size());
    auto [it, added] = key_ids.try_emplace(key, static_cast<int>(key_width.size()));
    if (!added && key_width[static_cast<size_t>(it->second)] != width)
      std::tie(it, added) = key_ids.try_emplace({3, static_cast<int>(u), holder, 0}, static_cast<int>(key_width.size()));
    if (added) key_width.push_back(width);
    return it->second;
  };
  std::map<std::pair<int, int>, int> copy_in;  // (node, holder piece) -> the copy's local index
  std::vector<std::map<int, int>> owner_terms(n);  // node -> key -> coefficient
  MatrixIds ids;
  auto add_edge = [&](Piece& pc, int lu, int lv, const std::vector<Cost>* mat) {
    PieceEdge pe;
    pe.u = lu, pe.v = lv;
    pe.transposed = pe.u > pe.v;
    if (pe.transposed) std::swap(pe.u, pe.v);
    pe.matrix = mat;
    pe.id = ids.id(mat);
    pc.edges.push_back(pe);
  };
  for (const Edge& e : p.edges) {
    const size_t u = static_cast<size_t>(e.u), v = static_cast<size_t>(e.v);
    const std::vector<Cost>& mat = *e.costs;
    const size_t su = unary[u].size();
    if (u == v) {  // a loop: its diagonal
      for (size_t s = 0; s < su; ++s) unary[u][s] = add_capped(unary[u][s], mat[s * su + s]);
      continue;
    }
    Piece& holder = pieces[static_cast<size_t>(piece_of[v])];
    int lu = local[u];
    if (piece_of[u] != piece_of[v]) {  // across pieces: v's piece reads a copy of u
      auto [it, added] = copy_in.try_emplace({static_cast<int>(u), piece_of[v]}, static_cast<int>(holder.nodes.size()));
      if (added) {
        const int key = key_of(u, v);
        holder.nodes.push_back({static_cast<int>(u), true, {{key, 1}}});
        --owner_terms[u][key];
      }
      lu = it->second;
    }
    add_edge(holder, lu, local[v], &mat);
  }
  // Couplings inside a piece become edges: free where the map holds, forbidden elsewhere;
  // one matrix per distinct map (a model's parameters repeat a few).
  std::map<std::pair<size_t, std::vector<int>>, std::vector<Cost>> coupling_mats;
  for (const Coupling& c : p.couplings) {
    const size_t u = static_cast<size_t>(c.u), v = static_cast<size_t>(c.v);
    if (piece_of[u] != piece_of[v] || u == v) continue;
    const size_t su = unary[u].size(), sv = unary[v].size();
    auto [it, added] = coupling_mats.try_emplace({sv, c.map});
    if (added) {
      it->second.assign(su * sv, kInfiniteCost);
      for (size_t s = 0; s < su; ++s)
        if (c.map[s] >= 0) it->second[s * sv + static_cast<size_t>(c.map[s])] = 0;
    }
    add_edge(pieces[static_cast<size_t>(piece_of[u])], local[u], local[v], &it->second);
  }
  for (size_t v = 0; v < n; ++v)
    for (const auto& [key, coefficient] : owner_terms[v])
      pieces[static_cast<size_t>(piece_of[v])].nodes[static_cast<size_t>(local[v])].terms.emplace_back(key, coefficient);

  // A local node's cost of strategy s: its own, or for a copy nothing where its source may
  // take s. Usage counts at the source only.
  auto cost_of = [&](const LocalNode& ln, size_t s) {
    const Cost c = unary[static_cast<size_t>(ln.source)][s];
    return ln.copy && c != kInfiniteCost ? 0 : c;
  };
  auto priced = [&](const LocalNode& ln) {
    const size_t v = static_cast<size_t>(ln.source);
    return !ln.copy && (range_lo[v] < range_hi[v] || own_lo[v] < own_hi[v]);
  };

  // Each piece's shape: its nodes' costs, usages, priced ranges and agreement terms, and
  // its edges.
  for (Piece& pc : pieces) {
    std::sort(pc.edges.begin(), pc.edges.end());
    std::vector<int64_t>& sh = pc.shape;
    sh.push_back(static_cast<int64_t>(pc.nodes.size()));
    for (const LocalNode& ln : pc.nodes) {
      const size_t v = static_cast<size_t>(ln.source);
      const bool on = priced(ln);
      sh.push_back(static_cast<int64_t>(unary[v].size()));
      sh.push_back(ln.copy);
      sh.push_back(on ? range_lo[v] : 0);
      sh.push_back(on ? range_hi[v] : 0);
      sh.push_back(on ? own_lo[v] : 0);
      sh.push_back(on ? own_hi[v] : 0);
      for (size_t s = 0; s < unary[v].size(); ++s) {
        sh.push_back(cost_of(ln, s));
        sh.push_back(on ? p.nodes[v].strategies[s].usage : 0);
      }
      sh.push_back(static_cast<int64_t>(ln.terms.size()));
      for (const auto& [key, coefficient] : ln.terms) sh.push_back(key), sh.push_back(coefficient);
    }
    for (const PieceEdge& e : pc.edges) {
      sh.push_back(e.u);
      sh.push_back(e.v);
      sh.push_back(e.id);
      sh.push_back(e.transposed);
    }
    uint64_t h = 0;
    for (int64_t x : sh) h = mix(h, static_cast<uint64_t>(x));
    pc.hash = h;
  }

  // Distinct pieces, each built into a model once. A node's allowed strategies are numbered
  // by list, and a matrix read between two such lists is built once for every piece.
  std::map<std::vector<int>, int> list_ids;
  std::map<std::tuple<int, bool, int, int>, int> restricted_id;
  std::vector<std::vector<Cost>> restricted;
  std::vector<PieceModel>& distinct = bp.distinct;
  std::vector<const Piece*> representative;
  std::unordered_multimap<uint64_t, int> by_hash;
  for (const Piece& pc : pieces) {
    if (pc.nodes.empty()) continue;
    ++bp.pieces;
    int found = -1;
    auto [lo, hi] = by_hash.equal_range(pc.hash);
    for (auto it = lo; it != hi && found < 0; ++it)
      if (representative[static_cast<size_t>(it->second)]->shape == pc.shape) found = it->second;
    if (found >= 0) {
      ++distinct[static_cast<size_t>(found)].count;
      continue;
    }
    by_hash.emplace(pc.hash, static_cast<int>(distinct.size()));
    representative.push_back(&pc);
    PieceModel d;
    d.count = 1;
    Model& m = d.model;
    m.n = static_cast<int>(pc.nodes.size());
    m.off.push_back(0);
    for (const LocalNode& ln : pc.nodes) {
      const size_t v = static_cast<size_t>(ln.source);
      const bool on = priced(ln);
      for (size_t s = 0; s < unary[v].size(); ++s) {
        const Cost c = cost_of(ln, s);
        if (c == kInfiniteCost) continue;
        m.cost.push_back(c);
        m.usage.push_back(on ? p.nodes[v].strategies[s].usage : 0);
        m.strat.push_back(static_cast<int>(s));
      }
      if (m.cost.size() == m.off.back()) {
        bp.infeasible = "node " + std::to_string(v) + " has no allowed strategy";
        return bp;
      }
      m.off.push_back(m.cost.size());
      m.orig.push_back(static_cast<int>(v));
      d.lo.push_back(on ? range_lo[v] : 0);
      d.hi.push_back(on ? range_hi[v] : 0);
      d.own_lo.push_back(on ? own_lo[v] : 0);
      d.own_hi.push_back(on ? own_hi[v] : 0);
      d.terms.push_back(ln.terms);
    }
    m.plo.assign(static_cast<size_t>(m.n), 0);
    m.phi.assign(static_cast<size_t>(m.n), 0);
    std::vector<std::vector<int>> adj(pc.nodes.size());
    std::vector<int> list_of(pc.nodes.size());
    for (size_t k = 0; k < pc.nodes.size(); ++k) {
      std::vector<int> lst(m.strat.begin() + static_cast<std::ptrdiff_t>(m.off[k]),
                           m.strat.begin() + static_cast<std::ptrdiff_t>(m.off[k + 1]));
      list_of[k] = list_ids.try_emplace(std::move(lst), static_cast<int>(list_ids.size())).first->second;
    }
    std::map<int, size_t> placed;  // restricted block -> its offset in this model's matrices
    for (const PieceEdge& e : pc.edges) {
      const auto key = std::make_tuple(e.id, e.transposed, list_of[static_cast<size_t>(e.u)], list_of[static_cast<size_t>(e.v)]);
      auto [known, added] = restricted_id.try_emplace(key, static_cast<int>(restricted.size()));
      if (added) {  // the matrix read between the two nodes' allowed strategies
        const int ru = m.num_strategies(e.u), rv = m.num_strategies(e.v);
        // Problem matrix row length: |S_v| of the problem's orientation (e.u's when transposed).
        const size_t sv = unary[static_cast<size_t>(pc.nodes[static_cast<size_t>(e.transposed ? e.u : e.v)].source)].size();
        std::vector<Cost> block;
        block.reserve(static_cast<size_t>(ru) * static_cast<size_t>(rv));
        for (int a = 0; a < ru; ++a) {
          const size_t sa = static_cast<size_t>(m.strat[m.off[static_cast<size_t>(e.u)] + static_cast<size_t>(a)]);
          for (int b = 0; b < rv; ++b) {
            const size_t sb = static_cast<size_t>(m.strat[m.off[static_cast<size_t>(e.v)] + static_cast<size_t>(b)]);
            block.push_back(e.transposed ? (*e.matrix)[sb * sv + sa] : (*e.matrix)[sa * sv + sb]);
          }
        }
        restricted.push_back(std::move(block));
      }
      auto [at, first] = placed.try_emplace(known->second, m.mat.size());
      if (first) {
        const std::vector<Cost>& block = restricted[static_cast<size_t>(known->second)];
        m.mat.insert(m.mat.end(), block.begin(), block.end());
      }
      Model::ModelEdge me;
      me.u = e.u, me.v = e.v, me.off = at->second;
      adj[static_cast<size_t>(e.u)].push_back(static_cast<int>(m.edges.size()));
      adj[static_cast<size_t>(e.v)].push_back(static_cast<int>(m.edges.size()));
      m.edges.push_back(me);
    }
    m.adj_off.assign(1, 0);
    for (const auto& a : adj) {
      m.adj.insert(m.adj.end(), a.begin(), a.end());
      m.adj_off.push_back(m.adj.size());
    }
    distinct.push_back(std::move(d));
  }
  bp.copies = copy_in.size();
  return bp;
}

}  // namespace tlm::solver
