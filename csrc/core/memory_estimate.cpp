#include "core/memory_estimate.h"

#include <algorithm>
#include <string>

#include "core/layout.h"
#include "core/placement.h"
#include "core/recompute.h"

namespace tlm {
namespace {

int64_t shard_bytes(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& spec) {
  int64_t n = element_size(t.dtype);
  for (int64_t s : max_local_shape(t.shape, mesh, spec)) n *= s;
  return n;
}

}  // namespace

MemoryEstimate estimate_memory(const Graph& g, const std::vector<OpStrategy>& chosen, int optimizer_states,
                               const std::vector<char>& recomputed) {
  if (optimizer_states < 0) throw InvalidArgument("optimizer_states must be >= 0");
  const int n = static_cast<int>(g.nodes.size());
  if (static_cast<int>(chosen.size()) != n) throw InvalidArgument("estimate_memory: one strategy per node expected");
  if (!recomputed.empty() && static_cast<int>(recomputed.size()) != n)
    throw InvalidArgument("estimate_memory: one recompute flag per node expected");
  const IrNode& out = g.nodes.back();
  MemoryEstimate m;
  auto bytes_of = [&](const TensorRef& r, const PlacementSpec& spec) {
    return shard_bytes(g.meta(r), g.mesh, spec);
  };

  // Which values are gradients (graph outputs with role "grad"), and their bytes.
  std::vector<std::string> roles;
  if (const auto* ex = out.extra.find("roles"))
    for (const auto& x : ex->as_array()) roles.push_back(x.as_string());
  std::vector<char> is_grad(n, 0);
  std::vector<int> outputs_reading(n, 0);
  std::vector<int64_t> reduced_bytes(n, 0);  // a gradient's bytes in its parameter's spec
  {
    const auto& out_args = out.args.as_array().at(0).as_array("output.args[0]");
    size_t k = 0;  // position among tensor outputs (chosen.back().inputs has one per output, tensors or not)
    for (size_t j = 0; j < out_args.size(); ++j, ++k) {
      std::vector<TensorRef> refs;
      collect_tensor_refs(out_args[j], refs);
      if (refs.empty()) continue;
      outputs_reading[refs[0].node] += 1;
      if (j >= roles.size() || roles[j] != "grad") continue;
      is_grad[refs[0].node] = 1;
      reduced_bytes[refs[0].node] = bytes_of(refs[0], chosen.back().inputs.at(k));
      m.gradients += reduced_bytes[refs[0].node];
    }
  }
  // A gradient nothing else reads is reduced as soon as it is made (the runtime's
  // buckets under the overlap schedule): from then on it holds its reduced bytes.
  auto reduced_when_made = [&](int i) {
    const IrNode& node = g.nodes[i];
    return is_grad[i] && !is_state(node) && node.outputs.size() == 1 && outputs_reading[i] == 1 &&
           std::all_of(node.users.begin(), node.users.end(), [&](int u) { return u == n - 1; });
  };

  std::vector<int> last_use(n);
  for (int i = 0; i < n; ++i) last_use[i] = i;
  for (int i = 0; i < n; ++i)
    for (const auto& r : g.nodes[i].tensor_inputs) last_use[r.node] = std::max(last_use[r.node], i);

  auto own_bytes = [&](int i) {
    int64_t own = 0;
    for (size_t k = 0; k < g.nodes[i].outputs.size(); ++k)
      own += bytes_of(TensorRef{i, static_cast<int>(k)}, chosen[i].outputs.at(k));
    return own;
  };
  // A recomputed value is freed after its last forward read and made again just before
  // backward's first read of it (recompute.h).
  std::vector<int64_t> remade_bytes(n, 0);
  std::vector<int> freed_at = last_use;
  if (!recomputed.empty()) {
    const std::vector<ValueUses> uses = value_uses(g);
    const std::vector<int> remade = tlm::remade_at(g, uses, recomputed);
    for (int i = 0; i + 1 < n; ++i) {
      // Made once and held throughout, or recomputed only for a user (a transient, not counted).
      if (remade[i] < 0 || uses[i].first_backward < 0 || remade[i] <= uses[i].last_forward) continue;
      freed_at[i] = uses[i].last_forward;
      remade_bytes[remade[i]] += own_bytes(i);
    }
  }

  std::vector<int64_t> frees_after(n, 0);
  int64_t live = 0, live_grads = 0, best = -1, best_grads = 0;
  for (int i = 0; i + 1 < n; ++i) {
    const IrNode& node = g.nodes[i];
    const int64_t own = own_bytes(i);
    live += remade_bytes[i];
    if (is_state(node)) {
      m.parameters += own;
      if (node.role == "param") m.optimizer_state += static_cast<int64_t>(optimizer_states) * own;
      continue;
    }
    // Inputs redistributed for this node live while it runs.
    int64_t transient = 0;
    for (size_t k = 0; k < node.tensor_inputs.size() && k < chosen[i].inputs.size(); ++k) {
      const TensorRef& r = node.tensor_inputs[k];
      if (chosen[r.node].outputs.at(r.output) != chosen[i].inputs[k]) transient += bytes_of(r, chosen[i].inputs[k]);
    }
    live += own;
    if (is_grad[i]) live_grads += own;
    m.timeline_nodes.push_back(i);
    m.timeline_bytes.push_back(live + transient);
    m.timeline_buffers.push_back(transient);
    if (live + transient > best) {
      best = live + transient;
      best_grads = live_grads;
    }
    if (reduced_when_made(i)) {
      live += reduced_bytes[i] - own;
      live_grads += reduced_bytes[i] - own;
    }
    if (last_use[i] < n - 1 || node.users.empty()) frees_after[std::max(last_use[i], i)] += own;
    if (freed_at[i] != last_use[i] && last_use[i] < n - 1) {  // recomputed: freed twice, once per span
      frees_after[std::max(freed_at[i], i)] += own;
    }
    live -= frees_after[i];
  }
  best = std::max<int64_t>(best, 0);
  m.activations = best - best_grads;
  m.peak = m.parameters + m.optimizer_state + best;
  return m;
}

}  // namespace tlm
