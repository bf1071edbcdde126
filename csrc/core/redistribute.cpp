// Redistribution plans with the semantics of torch 2.13's
// torch/distributed/tensor/_redistribute.py (generate_greedy_transform_infos +
// redistribute_local_tensor). The flattened-mesh merge (_optimize_transform_infos)
// only fuses consecutive same-kind collectives into one over a pre-built
// flattened mesh; it changes neither the result nor the set of accepted
// transitions, so plans keep one step per mesh dim.
#include "core/redistribute.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/placement_kinds.h"

namespace tlm {

const char* to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::LocalChunk: return "local_chunk";
    case CollectiveKind::LocalPartition: return "local_partition";
  }
  return "?";
}

namespace {

struct Transition {
  int mesh_dim;
  Placement from, to;
};

std::string refusal(const PlacementSpec& src, const PlacementSpec& dst, const Mesh& mesh, const std::string& why) {
  return "cannot redistribute " + to_string(src) + " -> " + to_string(dst) + " on mesh " + mesh.to_string() + ": " +
         why;
}

// DTensor (assert_no_mixed_partial_types) rejects specs mixing Partial kinds,
// except sum with avg, which commute.
void check_partial_mix(const PlacementSpec& spec, const std::string& which, const PlacementSpec& src,
                       const PlacementSpec& dst, const Mesh& mesh) {
  std::set<ReduceOp> ops;
  for (const auto& p : spec)
    if (p.is_partial()) ops.insert(p.reduce);
  bool ok = ops.size() <= 1 || ops == std::set<ReduceOp>{ReduceOp::Sum, ReduceOp::Avg};
  if (!ok)
    throw InvalidArgument(refusal(src, dst, mesh,
                                  "the " + which + " spec mixes Partial reduce kinds " + to_string(spec) +
                                      " (only sum with avg may be mixed, as in DTensor)"));
}

// The greedy transition list (generate_greedy_transform_infos), before the
// runtime's size-1 short-cut.
std::vector<Transition> greedy_transitions(const Mesh& mesh, const PlacementSpec& src, const PlacementSpec& dst) {
  std::vector<Transition> out;
  const int nd = static_cast<int>(mesh.ndim());
  if (nd == 1) {
    if (src[0] != dst[0]) out.push_back({0, src[0], dst[0]});
    return out;
  }
  PlacementSpec cur = src;
  int64_t num_shards = 1;
  for (int i = 0; i < nd; ++i)
    if (src[i].is_shard()) num_shards *= mesh.shape[i];
  if (num_shards > 1) {
    for (int md = nd - 1; md >= 0; --md) {
      Placement target = dst[md];
      if (target.is_shard()) {
        // Which earlier mesh dims shard this tensor dim, now and in the target?
        bool aligned = true;
        for (int i = 0; i < md; ++i)
          if (cur[i].is_shard(target.dim) != dst[i].is_shard(target.dim)) aligned = false;
        if (!aligned) target = Placement::replicate();
      }
      if (cur[md] != target) {
        out.push_back({md, cur[md], target});
        cur[md] = target;
      }
    }
  }
  for (int md = 0; md < nd; ++md) {
    if (cur[md] != dst[md]) {
      out.push_back({md, cur[md], dst[md]});
      cur[md] = dst[md];
    }
  }
  return out;
}

// One mesh dim's step (placement_kinds.h: the transition table), with the
// tensor dims and reduce op it acts on.
CollectiveStep classify(const Transition& t, const PlacementSpec& src, const PlacementSpec& dst, const Mesh& mesh) {
  const Placement& a = t.from;
  const Placement& b = t.to;
  const auto& rule = transition(a.kind, b.kind);
  if (!rule.allowed)
    throw InvalidArgument(refusal(src, dst, mesh,
                                  "mesh dim " + std::to_string(t.mesh_dim) + " would go " + a.to_string() + " -> " +
                                      b.to_string() + "; " + rule.refusal));
  CollectiveStep s;
  s.kind = rule.step;
  s.mesh_dim = t.mesh_dim;
  if (kind_info(a.kind).splits_dim) s.src_dim = a.dim;
  if (kind_info(b.kind).splits_dim) s.dst_dim = b.dim;
  s.reduce = kind_info(a.kind).pending ? a.reduce : b.reduce;
  return s;
}

}  // namespace

RedistributePlan plan_redistribute(const std::vector<int64_t>& global_shape, const Mesh& mesh,
                                   const PlacementSpec& src, const PlacementSpec& dst) {
  for (size_t d = 0; d < global_shape.size(); ++d)
    if (global_shape[d] < 0)
      throw InvalidArgument("global shape: dim " + std::to_string(d) + " has negative size " +
                            std::to_string(global_shape[d]) + " (expected sizes >= 0)");
  const int64_t ndim = static_cast<int64_t>(global_shape.size());
  PlacementSpec s = src, d = dst;
  validate_spec(s, ndim, mesh.ndim(), "source placements " + to_string(src));
  validate_spec(d, ndim, mesh.ndim(), "target placements " + to_string(dst));
  check_partial_mix(s, "source", s, d, mesh);
  check_partial_mix(d, "target", s, d, mesh);

  RedistributePlan plan;
  PlacementSpec state = s;
  for (const Transition& t : greedy_transitions(mesh, s, d)) {
    PlacementSpec before = state;
    state[t.mesh_dim] = t.to;
    if (mesh.shape[t.mesh_dim] == 1) continue;  // DTensor's num_chunks == 1 short-cut
    CollectiveStep step = classify(t, s, d, mesh);
    step.shape = global_shape;
    step.before = std::move(before);
    step.after = state;
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

bool whole_pieces(const PlacementSpec& spec, int tensor_dim, const std::vector<int64_t>& global_shape,
                  const Mesh& mesh) {
  if (tensor_dim < 0 || static_cast<size_t>(tensor_dim) >= global_shape.size()) return false;
  int64_t pieces = 1;
  for (size_t md = 0; md < spec.size(); ++md)
    if (spec[md].is_shard(tensor_dim)) pieces *= mesh.shape[md];
  return global_shape[static_cast<size_t>(tensor_dim)] % pieces == 0;
}

StepKey step_key(CollectiveKind kind, int mesh_dim, int tensor_dim, ReduceOp reduce, const PlacementSpec& before,
                 const PlacementSpec& after, const std::vector<int64_t>& global_shape, const Mesh& mesh) {
  StepKey k;
  k.kind = kind;
  k.mesh_dim = mesh_dim;
  k.reduce = reduce;
  // A gather's pieces are those it starts from, a scatter's those it ends with.
  if (kind == CollectiveKind::AllGather || kind == CollectiveKind::ReduceScatter) {
    k.tensor_dim = tensor_dim;
    k.whole = whole_pieces(kind == CollectiveKind::AllGather ? before : after, tensor_dim, global_shape, mesh);
  }
  return k;
}

StepKey step_key(const CollectiveStep& step, const std::vector<int64_t>& global_shape, const Mesh& mesh) {
  return step_key(step.kind, step.mesh_dim, step.kind == CollectiveKind::AllGather ? step.src_dim : step.dst_dim,
                  step.reduce, step.before, step.after, global_shape, mesh);
}

namespace {
// The nearest mesh dim past `d` in direction `step` (+1 / -1) with more than one rank, or -1:
// dims of one rank have no steps and leave the combined groups as they are.
int next_dim(const Mesh& mesh, int d, int step) {
  for (int e = d + step; e >= 0 && static_cast<size_t>(e) < mesh.ndim(); e += step)
    if (mesh.shape[static_cast<size_t>(e)] > 1) return e;
  return -1;
}

// Whether step `next` joins the run `run` of `steps` (see merged_step_runs).
bool joins(const std::vector<StepKey>& steps, const StepRun& run, const StepKey& next, const Mesh& mesh) {
  const StepKey& first = steps[run.begin];
  if (next.kind != first.kind) return false;
  switch (next.kind) {
    case CollectiveKind::AllReduce:
      return next.reduce == first.reduce &&
             (next.mesh_dim == next_dim(mesh, run.lo_dim, -1) || next.mesh_dim == next_dim(mesh, run.hi_dim, +1));
    case CollectiveKind::ReduceScatter:  // outer mesh dim first, then the one inside it
      return run.end - run.begin == 1 && first.whole && next.whole && next.tensor_dim == first.tensor_dim &&
             next.mesh_dim == next_dim(mesh, first.mesh_dim, +1);
    case CollectiveKind::AllGather:  // inner mesh dim first, then the one outside it
      return run.end - run.begin == 1 && first.whole && next.whole && next.tensor_dim == first.tensor_dim &&
             next.mesh_dim == next_dim(mesh, first.mesh_dim, -1);
    default:
      return false;
  }
}
}  // namespace

std::vector<StepRun> merged_step_runs(const std::vector<StepKey>& steps, const Mesh& mesh) {
  std::vector<StepRun> runs;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!runs.empty() && joins(steps, runs.back(), steps[i], mesh)) {
      StepRun& run = runs.back();
      run.end = i + 1;
      run.lo_dim = std::min(run.lo_dim, steps[i].mesh_dim);
      run.hi_dim = std::max(run.hi_dim, steps[i].mesh_dim);
      continue;
    }
    runs.push_back({i, i + 1, steps[i].mesh_dim, steps[i].mesh_dim});
  }
  return runs;
}

std::vector<StepRun> merged_step_runs(const std::vector<CollectiveStep>& steps, const std::vector<int64_t>& global_shape,
                                      const Mesh& mesh) {
  std::vector<StepKey> keys;
  keys.reserve(steps.size());
  for (const CollectiveStep& step : steps) keys.push_back(step_key(step, global_shape, mesh));
  return merged_step_runs(keys, mesh);
}

bool can_redistribute(const Mesh& mesh, const PlacementSpec& src, const PlacementSpec& dst) {
  // Refusals depend on placements and mesh sizes, never on tensor sizes: any
  // shape of the right rank answers the question.
  int64_t ndim = 0;
  for (const auto* spec : {&src, &dst})
    for (const auto& p : *spec)
      if (p.is_shard()) ndim = std::max<int64_t>(ndim, p.dim + 1);
  try {
    plan_redistribute(std::vector<int64_t>(static_cast<size_t>(ndim), 1), mesh, src, dst);
    return true;
  } catch (const InvalidArgument&) {
    return false;
  }
}

bool can_redistribute(const PlacementSpec& src, const PlacementSpec& dst) {
  if (src.empty() || src.size() != dst.size()) return false;
  return can_redistribute(make_mesh(std::vector<int64_t>(src.size(), 2)), src, dst);
}

}  // namespace tlm
