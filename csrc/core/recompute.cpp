#include "core/recompute.h"

#include <algorithm>
#include <map>
#include <utility>

namespace tlm {
namespace {

bool is_backward(const IrNode& node) {
  const json::Value* b = node.extra.find("backward");
  return b != nullptr && !b->is_null() && b->as_bool("extra.backward");
}

bool read_by_backward(const ValueUses& u) { return u.first_backward >= 0; }

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
    if (!recomputed[static_cast<size_t>(i)] || uses[static_cast<size_t>(i)].first_backward < 0) continue;
    int t = uses[static_cast<size_t>(i)].first_backward;
    for (int user : g.nodes[static_cast<size_t>(i)].users)
      if (at[static_cast<size_t>(user)] >= 0) t = std::min(t, at[static_cast<size_t>(user)]);
    at[static_cast<size_t>(i)] = t;
  }
  return at;
}

std::vector<int> recompute_candidates(const Graph& g, const std::vector<NodeStrategies>& strategies) {
  const std::vector<ValueUses> uses = value_uses(g);
  std::vector<int> out;
  for (int i = 0; i + 1 < static_cast<int>(g.nodes.size()); ++i) {
    const IrNode& node = g.nodes[i];
    const ValueUses& u = uses[i];
    if (node.op.rfind("aten.", 0) != 0 || is_backward(node) || node.has_fixed || node.outputs.size() != 1) continue;
    if (strategies[i].fell_back || strategies[i].family == "random") continue;
    // Only a value whose forward use ends before backward's first read has bytes to free.
    if (!read_by_backward(u) || u.first_backward <= u.last_forward + 1) continue;
    bool inputs_there = true;  // each input is state, a user input, or a value backward reads anyway
    for (const TensorRef& r : node.tensor_inputs) {
      const IrNode& in = g.nodes[r.node];
      if (in.op == "placeholder") inputs_there = inputs_there && in.role != "tangent";
      else inputs_there = inputs_there && read_by_backward(uses[r.node]) && !is_backward(in);
    }
    if (inputs_there) out.push_back(i);
  }
  return out;
}

void add_recompute_choices(const Graph& g, const std::vector<int>& candidates, CostTables& t) {
  solver::Problem& prob = t.problem;
  const std::vector<ValueUses> uses = value_uses(g);
  // Conservative: a candidate is made again as early as any candidate user of it could
  // be recomputed, kept or not.
  std::vector<char> is_candidate(g.nodes.size(), 0);
  for (int a : candidates) is_candidate[static_cast<size_t>(a)] = 1;
  const std::vector<int> remade = remade_at(g, uses, is_candidate);
  std::map<std::pair<int, int>, size_t> edge_of;  // (producer, consumer) -> problem edge
  for (size_t e = 0; e < prob.edges.size(); ++e) edge_of[{prob.edges[e].u, prob.edges[e].v}] = e;
  // The hold node's matrix with a producer: keeping is free with any producer strategy;
  // recomputing is allowed only where the producer's value needs no move. Layers repeat
  // their matrices, so each is derived once per distinct producer-consumer matrix.
  std::map<const std::vector<solver::Cost>*, solver::CostMatrix> hold_matrix_of;
  for (int a : candidates) {
    const solver::Node& own = prob.nodes[static_cast<size_t>(a)];
    const ValueUses& u = uses[static_cast<size_t>(a)];
    const int S = static_cast<int>(own.strategies.size());
    solver::Node hold, tail;
    hold.start = u.last_forward + 1;
    hold.end = tail.start = std::max(remade[static_cast<size_t>(a)], u.last_forward + 1);
    tail.end = u.last + 1;
    std::vector<int> hold_to_own(static_cast<size_t>(2 * S)), tail_to_own(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) {
      const solver::Strategy& st = own.strategies[static_cast<size_t>(s)];
      hold.strategies.push_back({0, st.usage});     // keep
      hold.strategies.push_back({st.cost, 0});      // recompute: its compute again, nothing held
      tail.strategies.push_back({0, st.usage});
      hold_to_own[static_cast<size_t>(2 * s)] = hold_to_own[static_cast<size_t>(2 * s + 1)] = s;
      tail_to_own[static_cast<size_t>(s)] = s;
    }
    const int hold_id = static_cast<int>(prob.nodes.size());
    const int tail_id = hold_id + 1;
    prob.nodes.push_back(std::move(hold));
    prob.nodes.push_back(std::move(tail));
    prob.nodes[static_cast<size_t>(a)].end = u.last_forward + 1;  // its forward span only
    prob.couplings.push_back({hold_id, a, hold_to_own});
    prob.couplings.push_back({tail_id, a, tail_to_own});
    std::vector<int> producers;
    for (const TensorRef& r : g.nodes[static_cast<size_t>(a)].tensor_inputs) producers.push_back(r.node);
    std::sort(producers.begin(), producers.end());
    producers.erase(std::unique(producers.begin(), producers.end()), producers.end());
    for (int x : producers) {
      const auto found = edge_of.find({x, a});
      if (found == edge_of.end()) continue;  // no edge: every pair is free
      const solver::CostMatrix& m = prob.edges[found->second].costs;
      solver::CostMatrix& hm = hold_matrix_of[m.get()];
      if (!hm) {
        const size_t X = prob.nodes[static_cast<size_t>(x)].strategies.size();
        std::vector<solver::Cost> c(X * static_cast<size_t>(2 * S), 0);
        for (size_t sx = 0; sx < X; ++sx)
          for (int s = 0; s < S; ++s)
            if ((*m)[sx * static_cast<size_t>(S) + static_cast<size_t>(s)] != 0)
              c[sx * static_cast<size_t>(2 * S) + static_cast<size_t>(2 * s + 1)] = solver::kInfiniteCost;
        hm = solver::make_cost_matrix(std::move(c));
      }
      prob.edges.emplace_back(x, hold_id, hm);
      t.edge_count += 1;
      t.edge_matrix_entries += static_cast<int64_t>(hm->size());
    }
    t.recompute.push_back(RecomputeSite{a, hold_id, tail_id});
  }
}

std::vector<char> recomputed_nodes(const CostTables& t, size_t graph_nodes, const std::vector<int>& solution) {
  std::vector<char> out(graph_nodes, 0);
  for (const RecomputeSite& r : t.recompute)
    if (static_cast<size_t>(r.hold) < solution.size() && solution[static_cast<size_t>(r.hold)] % 2 == 1)
      out[static_cast<size_t>(r.node)] = 1;
  return out;
}

}  // namespace tlm
