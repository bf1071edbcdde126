#include "core/recompute.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

namespace tlm {
namespace {

bool is_backward(const IrNode& node) {
  const json::Value* b = node.extra.find("backward");
  return b != nullptr && !b->is_null() && b->as_bool("extra.backward");
}

bool read_by_backward(const ValueUses& u) { return u.first_backward >= 0; }

// What recomputing needs to know of every node: whether it may be recomputed at all,
// and whether it is there in backward without being recomputed for someone else.
class Closure {
 public:
  Closure(const Graph& g, const std::vector<NodeStrategies>& strategies)
      : g_(g), strat_(strategies), uses_(value_uses(g)), ok_(g.nodes.size(), -1) {}

  const std::vector<ValueUses>& uses() const { return uses_; }

  bool recomputable(int i) const {
    const IrNode& node = g_.nodes[static_cast<size_t>(i)];
    return node.op.rfind("aten.", 0) == 0 && !is_backward(node) && !node.has_fixed && node.outputs.size() == 1 &&
           !strat_[static_cast<size_t>(i)].fell_back && strat_[static_cast<size_t>(i)].family != "random";
  }

  // In backward without recomputing it for another value: state, a user input, or a
  // forward value backward reads (kept, or recomputed as a candidate of its own).
  bool there(int i) const {
    const IrNode& node = g_.nodes[static_cast<size_t>(i)];
    if (node.op == "placeholder") return node.role != "tangent";
    return !is_backward(node) && read_by_backward(uses_[static_cast<size_t>(i)]);
  }

  // Whether node i's inputs can all be had in backward: there, or recomputed in turn.
  bool inputs_ok(int i) {
    for (const TensorRef& r : g_.nodes[static_cast<size_t>(i)].tensor_inputs)
      if (!there(r.node) && !closure_ok(r.node)) return false;
    return true;
  }

  // The inputs of node i recomputed with it (not there by themselves).
  std::vector<int> needed_inputs(int i) const {
    std::vector<int> out;
    for (const TensorRef& r : g_.nodes[static_cast<size_t>(i)].tensor_inputs)
      if (!there(r.node)) out.push_back(r.node);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

 private:
  bool closure_ok(int i) {  // memoized; inputs come earlier, so the recursion ends
    int& ok = ok_[static_cast<size_t>(i)];
    if (ok < 0) ok = recomputable(i) && inputs_ok(i) ? 1 : 0;
    return ok == 1;
  }

  const Graph& g_;
  const std::vector<NodeStrategies>& strat_;
  std::vector<ValueUses> uses_;
  std::vector<int> ok_;
};

}  // namespace

std::vector<ValueUses> value_uses(const Graph& g) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<ValueUses> u(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) u[static_cast<size_t>(i)].last_forward = u[static_cast<size_t>(i)].last = i;
  for (int j = 0; j < n; ++j) {
    const bool bwd = is_backward(g.nodes[static_cast<size_t>(j)]);
    for (const TensorRef& r : g.nodes[static_cast<size_t>(j)].tensor_inputs) {
      ValueUses& x = u[static_cast<size_t>(r.node)];
      x.last = std::max(x.last, j);
      if (!bwd) x.last_forward = std::max(x.last_forward, j);
      else if (x.first_backward < 0 || j < x.first_backward) x.first_backward = j;
    }
  }
  return u;
}

std::vector<int> remade_at(const Graph& g, const std::vector<ValueUses>& uses, const std::vector<char>& recomputed) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> at(static_cast<size_t>(n), -1);
  for (int i = n - 1; i >= 0; --i) {  // users come later: theirs are known first
    if (!recomputed[static_cast<size_t>(i)]) continue;
    int t = uses[static_cast<size_t>(i)].first_backward;  // -1: only recomputed for its users
    for (int user : g.nodes[static_cast<size_t>(i)].users) {
      const int u = at[static_cast<size_t>(user)];
      if (u >= 0) t = t < 0 ? u : std::min(t, u);
    }
    at[static_cast<size_t>(i)] = t;
  }
  return at;
}

std::vector<int> recompute_candidates(const Graph& g, const std::vector<NodeStrategies>& strategies) {
  Closure c(g, strategies);
  std::vector<int> out;
  for (int i = 0; i + 1 < static_cast<int>(g.nodes.size()); ++i) {
    const ValueUses& u = c.uses()[static_cast<size_t>(i)];
    // Only a value whose forward use ends before backward's first read has bytes to free.
    if (!c.recomputable(i) || !read_by_backward(u) || u.first_backward <= u.last_forward + 1) continue;
    if (c.inputs_ok(i)) out.push_back(i);
  }
  return out;
}

std::vector<int> cut_long_chains(const Graph& g, const std::vector<NodeStrategies>& strategies,
                                 const std::vector<int>& candidates) {
  Closure closure(g, strategies);
  const std::vector<ValueUses>& uses = closure.uses();
  const int n = static_cast<int>(g.nodes.size());
  int first = n, last = -1;  // backward's span
  for (int i = 0; i < n; ++i)
    if (is_backward(g.nodes[static_cast<size_t>(i)])) first = std::min(first, i), last = std::max(last, i);
  if (last < first) return candidates;
  const int window = std::max(1, static_cast<int>(2.0 * std::sqrt(static_cast<double>(last - first + 1))));
  // The values a candidate may be recomputed with: its closure (need nodes), as add_recompute_choices finds it.
  std::vector<char> candidate(static_cast<size_t>(n), 0), maybe(static_cast<size_t>(n), 0);
  for (int a : candidates) candidate[static_cast<size_t>(a)] = maybe[static_cast<size_t>(a)] = 1;
  for (int i = n - 1; i >= 0; --i)  // users come later: a closure node's requesters are marked first
    if (maybe[static_cast<size_t>(i)])
      for (int x : closure.needed_inputs(i)) maybe[static_cast<size_t>(x)] = 1;
  // Users first, as remade_at: a candidate pulled more than the window before its own first
  // backward read is kept instead, so it pulls nothing further.
  std::vector<int> at(static_cast<size_t>(n), -1);
  std::vector<int> out;
  for (int i = n - 1; i >= 0; --i) {
    if (!maybe[static_cast<size_t>(i)]) continue;
    int t = uses[static_cast<size_t>(i)].first_backward;
    for (int user : g.nodes[static_cast<size_t>(i)].users) {
      const int u = at[static_cast<size_t>(user)];
      if (u >= 0) t = t < 0 ? u : std::min(t, u);
    }
    if (candidate[static_cast<size_t>(i)]) {
      if (t < uses[static_cast<size_t>(i)].first_backward - window) continue;  // kept: at stays -1
      out.push_back(i);
    }
    at[static_cast<size_t>(i)] = t;
  }
  std::reverse(out.begin(), out.end());
  // Repeated blocks (a transformer's layers) are cut alike: a value kept in one block is kept
  // at its place (its rank among its block's nodes) in every block, so the blocks stay one
  // block repeated (symmetry.h) and no segment grows.
  std::map<std::string, int> seen;  // block -> nodes met so far
  std::vector<int> place(static_cast<size_t>(n), -1);
  for (int i = 0; i + 1 < n; ++i) {
    const json::Value* b = g.nodes[static_cast<size_t>(i)].extra.find("block");
    if (b != nullptr && !b->is_null()) place[static_cast<size_t>(i)] = seen[b->as_string("extra.block")]++;
  }
  std::vector<char> kept_here(static_cast<size_t>(n), 0);
  for (int a : out) kept_here[static_cast<size_t>(a)] = 1;
  std::set<int> cut_places;
  for (int a : candidates)
    if (!kept_here[static_cast<size_t>(a)] && place[static_cast<size_t>(a)] >= 0) cut_places.insert(place[static_cast<size_t>(a)]);
  std::vector<int> alike;
  for (int a : out)
    if (place[static_cast<size_t>(a)] < 0 || !cut_places.count(place[static_cast<size_t>(a)])) alike.push_back(a);
  return alike;
}

void add_recompute_choices(const Graph& g, const std::vector<NodeStrategies>& strategies,
                           const std::vector<int>& candidates, CostTables& t, bool forced) {
  solver::Problem& prob = t.problem;
  Closure closure(g, strategies);
  const std::vector<ValueUses>& uses = closure.uses();

  // The values recomputed only for candidates (their closures), each with a need node.
  std::vector<int> variable(g.nodes.size(), -1);  // IR node -> its hold or need problem node
  std::vector<int> order;                          // candidates and closure nodes, each once
  for (int a : candidates) variable[static_cast<size_t>(a)] = -2;
  for (size_t k = 0; k < candidates.size(); ++k) order.push_back(candidates[k]);
  for (size_t k = 0; k < order.size(); ++k)
    for (int x : closure.needed_inputs(order[k]))
      if (variable[static_cast<size_t>(x)] == -1) {
        variable[static_cast<size_t>(x)] = -2;
        order.push_back(x);
      }
  // Conservative: a candidate is made again as early as any candidate user of it could
  // be recomputed, kept or not.
  std::vector<char> maybe(g.nodes.size(), 0);
  for (int a : order) maybe[static_cast<size_t>(a)] = 1;
  const std::vector<int> remade = remade_at(g, uses, maybe);

  for (int a : order) {
    const solver::Node& own = prob.nodes[static_cast<size_t>(a)];
    const ValueUses& u = uses[static_cast<size_t>(a)];
    const bool candidate = read_by_backward(u);
    const int S = static_cast<int>(own.strategies.size());
    solver::Node hold, tail;
    std::vector<int> to_own(static_cast<size_t>(2 * S)), tail_to_own(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) {
      const solver::Strategy& st = own.strategies[static_cast<size_t>(s)];
      hold.strategies.push_back({0, candidate ? st.usage : 0});  // keep / not needed
      hold.strategies.push_back({st.cost, 0});                  // recompute: its compute again
      tail.strategies.push_back({0, st.usage});
      to_own[static_cast<size_t>(2 * s)] = to_own[static_cast<size_t>(2 * s + 1)] = s;
      tail_to_own[static_cast<size_t>(s)] = s;
    }
    const int hold_id = static_cast<int>(prob.nodes.size());
    RecomputeSite site{a, hold_id, -1};
    if (candidate) {
      hold.start = u.last_forward + 1;
      hold.end = tail.start = std::max(remade[static_cast<size_t>(a)], u.last_forward + 1);
      tail.end = u.last + 1;
      if (forced) hold.usage_upper = 0;  // only the recompute strategies (or a keep of no bytes)
      prob.nodes.push_back(std::move(hold));
      site.tail = hold_id + 1;
      prob.nodes.push_back(std::move(tail));
      prob.couplings.push_back({site.tail, a, tail_to_own});
      prob.nodes[static_cast<size_t>(a)].end = u.last_forward + 1;  // its forward span only
    } else {
      prob.nodes.push_back(std::move(hold));  // a need node: no interval, no bytes
    }
    prob.couplings.push_back({hold_id, a, to_own});
    variable[static_cast<size_t>(a)] = hold_id;
    t.recompute.push_back(site);
  }

  // Values made from parameters and buffers alone in forward (a weight's mixed-precision
  // cast, its transpose): a move of one is a parameter's gather, which backward makes anyway
  // (the gradient's matmul reads the gathered weight; the runtime gathers it again there,
  // _runtime/reshard.py, or keeps it), so a recompute reading it adds no communication.
  // Without this, no value reading an FSDP-sharded weight could be recomputed. (A weight
  // backward does not read, a bias, is gathered again unpriced: small, and rarely sharded.)
  std::vector<char> of_state(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const IrNode& nd = g.nodes[i];
    if (nd.op == "placeholder") {
      of_state[i] = nd.role == "param" || nd.role == "buffer";
    } else if (!is_backward(nd) && nd.op != "output" && !nd.tensor_inputs.empty()) {
      of_state[i] = std::all_of(nd.tensor_inputs.begin(), nd.tensor_inputs.end(),
                                [&](const TensorRef& r) { return of_state[static_cast<size_t>(r.node)] != 0; });
    }
  }
  // Edges from each recomputed value's producers. Recompute columns: an activation's move
  // costs its collective again (backward issues it again, _runtime/recompute.py), a
  // parameter's gather is free (above); a producer recomputed for it (a need node) must be needed.
  std::map<std::pair<int, int>, size_t> edge_of;  // (producer, consumer) -> problem edge
  for (size_t e = 0; e < prob.edges.size(); ++e) edge_of[{prob.edges[e].u, prob.edges[e].v}] = e;
  std::map<std::tuple<const std::vector<solver::Cost>*, bool, bool, size_t, size_t>, solver::CostMatrix> matrix_of;
  for (int a : order) {
    const int v = variable[static_cast<size_t>(a)];
    const size_t S = prob.nodes[static_cast<size_t>(a)].strategies.size();
    std::vector<int> producers;
    for (const TensorRef& r : g.nodes[static_cast<size_t>(a)].tensor_inputs) producers.push_back(r.node);
    std::sort(producers.begin(), producers.end());
    producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
    for (int x : producers) {
      const auto found = edge_of.find({x, a});
      const bool state = of_state[static_cast<size_t>(x)] != 0;
      const bool need = !closure.there(x);  // recomputed for this value: its need node
      const size_t X = prob.nodes[static_cast<size_t>(x)].strategies.size();
      const solver::CostMatrix* m = found == edge_of.end() ? nullptr : &prob.edges[found->second].costs;
      if (m == nullptr && !need) continue;  // no edge and nothing required: every pair is free
      solver::CostMatrix& hm = matrix_of[{m ? m->get() : nullptr, state, need, X, S}];
      if (!hm) {
        const size_t rows = need ? 2 * X : X;
        std::vector<solver::Cost> c(rows * 2 * S, 0);
        for (size_t row = 0; row < rows; ++row) {
          const size_t sx = need ? row / 2 : row;
          for (size_t s = 0; s < S; ++s) {
            solver::Cost& rc = c[row * 2 * S + 2 * s + 1];
            if (need && row % 2 == 0) {
              rc = solver::kInfiniteCost;  // recomputing a value needs this input made again
              continue;
            }
            const solver::Cost move = m ? (**m)[sx * S + s] : 0;
            if (move != 0) rc = state ? 0 : move;
          }
        }
        hm = solver::make_cost_matrix(std::move(c));
      }
      const int u = need ? variable[static_cast<size_t>(x)] : x;
      prob.edges.emplace_back(u, v, hm);
      t.edge_count += 1;
      t.edge_matrix_entries += static_cast<int64_t>(hm->size());
    }
  }
}

std::vector<char> recomputed_nodes(const CostTables& t, size_t graph_nodes, const std::vector<int>& solution) {
  std::vector<char> out(graph_nodes, 0);
  for (const RecomputeSite& r : t.recompute)
    if (static_cast<size_t>(r.hold) < solution.size() && solution[static_cast<size_t>(r.hold)] % 2 == 1)
      out[static_cast<size_t>(r.node)] = 1;
  return out;
}

std::vector<solver::Cost> recompute_costs(const CostTables& t, size_t graph_nodes, const std::vector<int>& solution) {
  std::vector<solver::Cost> out(graph_nodes, 0);
  std::map<int, int> node_of_hold;
  for (const RecomputeSite& r : t.recompute) {
    const int h = solution.at(static_cast<size_t>(r.hold));
    if (h % 2 == 0) continue;
    out[static_cast<size_t>(r.node)] = t.problem.nodes[static_cast<size_t>(r.hold)].strategies[static_cast<size_t>(h)].cost;
    node_of_hold[r.hold] = r.node;
  }
  for (const solver::Edge& e : t.problem.edges) {  // a hold or need node is always its edges' v
    const auto found = node_of_hold.find(e.v);
    if (found == node_of_hold.end()) continue;
    const size_t sv = t.problem.nodes[static_cast<size_t>(e.v)].strategies.size();
    out[static_cast<size_t>(found->second)] +=
        (*e.costs)[static_cast<size_t>(solution.at(static_cast<size_t>(e.u))) * sv +
                   static_cast<size_t>(solution.at(static_cast<size_t>(e.v)))];
  }
  return out;
}

}  // namespace tlm
