#include "core/shared_moves.h"

#include <map>
#include <string>
#include <utility>

namespace tlm {
namespace {

// Whether moving `from` -> `to` makes no rank's piece larger: no mesh dim that shards the
// value in `from` holds it whole (or pending) in `to`. Rank-independent by construction
// (uneven shards may differ by a row between ranks; what matters is that no dim gathers).
bool gathers_nothing(const PlacementSpec& from, const PlacementSpec& to) {
  for (size_t d = 0; d < from.size() && d < to.size(); ++d)
    if (from[d].is_shard() && !to[d].is_shard()) return false;
  return from.size() == to.size();
}

struct Readers {
  int count = 0;
  bool one_spec = true;
  PlacementSpec to;
  void add(const PlacementSpec& spec) {
    if (count++ == 0) to = spec;
    else if (spec != to) one_spec = false;
  }
};

}  // namespace

std::vector<SharedMove> shared_moves(const Graph& g, const Plan& plan) {
  if (plan.nodes.size() != g.nodes.size())
    throw InvalidArgument("plan has " + std::to_string(plan.nodes.size()) + " nodes but the graph has " +
                          std::to_string(g.nodes.size()) + " (plan and graph do not match)");
  std::map<std::pair<int, int>, Readers> readers;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const IrNode& n = g.nodes[i];
    const std::vector<PlacementSpec>& want = plan.nodes[i].strategy.inputs;
    if (n.op == "placeholder") continue;
    if (n.op == "output") {  // one spec per graph output position (empty: not a tensor)
      const json::Value& outs = n.args.as_array().at(0);
      for (size_t j = 0; j < outs.as_array().size() && j < want.size(); ++j) {
        const json::Value& a = outs.as_array()[j];
        if (!is_tensor_ref(a)) continue;
        std::vector<TensorRef> ref;
        collect_tensor_refs(a, ref);
        readers[{ref.at(0).node, ref.at(0).output}].add(want[j]);
      }
      continue;
    }
    for (size_t k = 0; k < n.tensor_inputs.size() && k < want.size(); ++k)
      readers[{n.tensor_inputs[k].node, n.tensor_inputs[k].output}].add(want[k]);
  }
  std::vector<SharedMove> out;
  for (const auto& [ref, r] : readers) {
    if (r.count < 2 || !r.one_spec) continue;
    const PlannedNode& producer = plan.nodes.at(static_cast<size_t>(ref.first));
    // A value backward recomputes is not held between forward and backward; a moved copy
    // shared with a backward reader would be.
    if (producer.recompute) continue;
    const std::vector<PlacementSpec>& made = producer.strategy.outputs;
    if (static_cast<size_t>(ref.second) >= made.size()) continue;
    const PlacementSpec& from = made[static_cast<size_t>(ref.second)];
    if (from != r.to && gathers_nothing(from, r.to)) out.push_back(SharedMove{TensorRef{ref.first, ref.second}, r.to});
  }
  return out;
}

}  // namespace tlm
