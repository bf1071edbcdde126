// Prices compute (roofline), collectives (collective_cost.h formulas on the
// mesh dim's group topology) and redistributions (sum over the placement
// algebra's plan). Formulas and constants: docs/cost_model.md.
#include "core/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/layout.h"

namespace tlm {

double peak_flops(const DeviceProfile& device, DType dtype) {
  switch (dtype) {
    case DType::Float64: case DType::Complex128: return device.peak_flops_fp64;
    case DType::Float16: case DType::BFloat16: return device.peak_flops_bf16;
    case DType::Float8E4M3: case DType::Float8E5M2: return device.peak_flops_fp8;
    default: return device.peak_flops_fp32;  // float32, complex64, integers, bool
  }
}

double CostModel::compute_seconds(const OpWork& work, DType dtype) const {
  if (!std::isfinite(work.flops) || !std::isfinite(work.bytes) || work.flops < 0 || work.bytes < 0)
    throw InvalidArgument("op work must be finite and non-negative, got flops=" + std::to_string(work.flops) +
                          " bytes=" + std::to_string(work.bytes));
  if (work.flops == 0 && work.bytes == 0) return 0;  // views, metadata ops: no kernel runs
  double flop_time = work.flops / (peak_flops(device, dtype) * device.compute_efficiency);
  if (work.min_dim > 0 && device.matmul_half_dim > 0) flop_time *= 1 + device.matmul_half_dim / work.min_dim;
  if (work.head_dim > 0 && device.attention_half_dim > 0) flop_time *= 1 + device.attention_half_dim / work.head_dim;
  if (work.causal_keys > 0 && device.attention_causal_tile > 0)  // the diagonal's tiles whole: up to the full scores
    flop_time *= std::min(2.0, 1 + device.attention_causal_tile / work.causal_keys);
  const double byte_time = work.bytes / (device.memory_bandwidth * device.memory_efficiency);
  return std::max(flop_time, byte_time) + device.kernel_overhead_s;
}

double CostModel::optimizer_step_seconds(double shard_bytes, DType dtype, int optimizer_states) const {
  if (!std::isfinite(shard_bytes) || shard_bytes < 0 || optimizer_states < 0)
    throw InvalidArgument("optimizer step: shard bytes and optimizer states must be non-negative, got bytes=" +
                          std::to_string(shard_bytes) + " states=" + std::to_string(optimizer_states));
  if (shard_bytes == 0) return 0;
  const double kernels = 1 + 3.0 * optimizer_states;
  const double elements = shard_bytes / static_cast<double>(element_size(dtype));
  const OpWork work{elements * (2 + 3.0 * optimizer_states), shard_bytes * (3 + 8.0 * optimizer_states)};
  const double streams = device.optimizer_bandwidth > 0 ? work.bytes / device.optimizer_bandwidth + device.kernel_overhead_s
                                                        : compute_seconds(work, dtype);
  return streams + (kernels - 1) * device.kernel_overhead_s + optimizer_dispatch_seconds(optimizer_states);
}

double CostModel::optimizer_dispatch_seconds(int optimizer_states) const {
  return (1 + 3.0 * optimizer_states) * device.optimizer_kernel_overhead_s;
}

double CostModel::bucket_copy_seconds(double bytes) const {
  if (!std::isfinite(bytes) || bytes < 0)
    throw InvalidArgument("bucket copy: bytes must be finite and non-negative, got " + std::to_string(bytes));
  return 2 * bytes / (device.memory_bandwidth * device.memory_efficiency);
}

const CollectiveFit* CostModel::fit(CollectiveKind kind, bool inter) const {
  for (const auto& f : fits)
    if (f.kind == kind && f.inter == inter) return &f;
  return nullptr;
}

Link CostModel::link(CollectiveKind kind, bool inter) const {
  if (const CollectiveFit* f = fit(kind, inter)) return {f->latency, f->bandwidth};
  return inter ? Link{topology.inter_latency, topology.inter_bandwidth}
               : Link{topology.intra_latency, topology.intra_bandwidth};
}

namespace {

// One level of links for groups that are all intra-node or all across nodes
// (Mixed groups are priced on the inter-node link, their slowest hop).
double flat_seconds(CollectiveKind kind, int64_t n, double bytes, const Link& l, bool tree_allowed) {
  switch (kind) {
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
      return ring_gather_seconds(n, bytes, l);
    case CollectiveKind::AllReduce: {
      const double ring = ring_allreduce_seconds(n, bytes, l);
      // Like NCCL, take the faster of ring and tree; a calibrated fit already
      // reflects whatever algorithm the library chose, so it is used as is.
      return tree_allowed ? std::min(ring, tree_allreduce_seconds(n, bytes, l)) : ring;
    }
    case CollectiveKind::AllToAll:
      return alltoall_seconds(n, bytes, l);
    default:
      return 0;
  }
}

double hierarchical_seconds(CollectiveKind kind, const GroupTopology& g, double bytes, const Link& intra,
                            const Link& inter, bool tree_allowed) {
  switch (kind) {
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
      return hierarchical_ring_seconds(g.local, g.nodes, bytes, intra, inter);
    case CollectiveKind::AllReduce: {
      const double ring = 2 * hierarchical_ring_seconds(g.local, g.nodes, bytes, intra, inter);
      if (!tree_allowed) return ring;
      return std::min(ring, hierarchical_tree_allreduce_seconds(g.local, g.nodes, bytes, intra, inter));
    }
    case CollectiveKind::AllToAll:
      return hierarchical_alltoall_seconds(g.local, g.nodes, bytes, intra, inter);
    default:
      return 0;
  }
}

int64_t shard_bytes(const std::vector<int64_t>& shape, const Mesh& mesh, const PlacementSpec& spec, DType dtype) {
  int64_t n = 1;
  for (int64_t s : max_local_shape(shape, mesh, spec)) n *= s;
  return n * element_size(dtype);
}

void check_mesh_dim(const Mesh& mesh, int mesh_dim) {
  if (mesh_dim < 0 || static_cast<size_t>(mesh_dim) >= mesh.ndim())
    throw InvalidArgument("mesh dim " + std::to_string(mesh_dim) + " is outside mesh " + mesh.to_string());
}

}  // namespace

double CostModel::collective_seconds(CollectiveKind kind, const Mesh& mesh, int mesh_dim, double bytes) const {
  if (!is_communicating(kind))
    throw InvalidArgument(std::string("collective_seconds prices communicating collectives only, got ") +
                          collective_name(kind));
  if (!std::isfinite(bytes) || bytes < 0)
    throw InvalidArgument("collective bytes must be finite and >= 0, got " + std::to_string(bytes));
  const GroupTopology g = group_topology(mesh, mesh_dim, topology.ranks_per_node);
  if (g.kind == GroupTopology::Kind::Single || bytes == 0) return 0;  // nothing moves
  const Link intra = link(kind, false), inter = link(kind, true);
  const bool intra_tree = fit(kind, false) == nullptr, inter_tree = fit(kind, true) == nullptr;
  switch (g.kind) {
    case GroupTopology::Kind::Intra:
      return flat_seconds(kind, g.size, bytes, intra, intra_tree);
    case GroupTopology::Kind::Inter:
    case GroupTopology::Kind::Mixed:
      return flat_seconds(kind, g.size, bytes, inter, inter_tree);
    case GroupTopology::Kind::Hierarchical:
      return hierarchical_seconds(kind, g, bytes, intra, inter, intra_tree && inter_tree);
    default:
      return 0;
  }
}

double CostModel::collective_seconds(CollectiveKind kind, const Mesh& mesh, int lo_dim, int hi_dim,
                                     double bytes) const {
  check_mesh_dim(mesh, lo_dim);
  check_mesh_dim(mesh, hi_dim);
  if (lo_dim > hi_dim) throw InvalidArgument("collective_seconds: mesh dims " + std::to_string(lo_dim) + ".." +
                                             std::to_string(hi_dim) + " are not ascending");
  if (lo_dim == hi_dim) return collective_seconds(kind, mesh, lo_dim, bytes);
  // The combined groups are mesh dim lo_dim of the mesh with lo_dim..hi_dim flattened: the
  // same ranks, laid out row-major as before.
  std::vector<int64_t> shape(mesh.shape.begin(), mesh.shape.begin() + lo_dim);
  int64_t n = 1;
  for (int d = lo_dim; d <= hi_dim; ++d) n *= mesh.shape[static_cast<size_t>(d)];
  shape.push_back(n);
  shape.insert(shape.end(), mesh.shape.begin() + hi_dim + 1, mesh.shape.end());
  return collective_seconds(kind, make_mesh(std::move(shape)), lo_dim, bytes);
}

double CostModel::step_seconds(const CollectiveStep& step, const Mesh& mesh, DType dtype) const {
  check_mesh_dim(mesh, step.mesh_dim);
  return step_seconds(step.kind, step.mesh_dim, step.reduce,
                      static_cast<double>(shard_bytes(step.shape, mesh, step.before, dtype)),
                      static_cast<double>(shard_bytes(step.shape, mesh, step.after, dtype)), mesh, dtype);
}

double CostModel::step_seconds(CollectiveKind kind, int mesh_dim, ReduceOp reduce, double bytes_before,
                               double bytes_after, const Mesh& mesh, DType dtype) const {
  return run_seconds(kind, mesh_dim, mesh_dim, reduce, bytes_before, bytes_after, mesh, dtype);
}

double CostModel::run_seconds(CollectiveKind kind, int lo_dim, int hi_dim, ReduceOp reduce, double bytes_before,
                              double bytes_after, const Mesh& mesh, DType dtype) const {
  check_mesh_dim(mesh, lo_dim);
  check_mesh_dim(mesh, hi_dim);
  double n = 1;  // ranks in one of the (combined) groups
  for (int d = lo_dim; d <= hi_dim; ++d) n *= static_cast<double>(mesh.shape[static_cast<size_t>(d)]);
  const bool one_dim = lo_dim == hi_dim;
  switch (kind) {
    case CollectiveKind::AllGather:  // gathers n padded chunks of the (first step's) input shard
      return collective_seconds(kind, mesh, lo_dim, hi_dim, n * bytes_before);
    case CollectiveKind::ReduceScatter:  // reduces n padded chunks of the (last step's) output shard's size
      return collective_seconds(kind, mesh, lo_dim, hi_dim, n * bytes_after);
    case CollectiveKind::AllReduce:
      return collective_seconds(kind, mesh, lo_dim, hi_dim, bytes_before);
    default:
      if (!one_dim)
        throw InvalidArgument(std::string("run_seconds: ") + collective_name(kind) + " runs are never merged");
      break;
  }
  switch (kind) {
    case CollectiveKind::AllToAll:  // send and receive buffers differ only by uneven padding
      return collective_seconds(kind, mesh, lo_dim, std::max(bytes_before, bytes_after));
    case CollectiveKind::LocalChunk:
      // DTensor's Replicate -> Shard clones this rank's chunk: read + write it.
      return compute_seconds(OpWork{0, 2 * bytes_after}, dtype);
    case CollectiveKind::LocalPartition:
      // Replicate -> Partial(sum) divides by n (one pointwise op over the
      // shard); avg/max/min keep the value as is, which costs nothing.
      if (reduce != ReduceOp::Sum) return 0;
      return compute_seconds(OpWork{bytes_before / static_cast<double>(element_size(dtype)), 2 * bytes_before}, dtype);
    default:
      return 0;
  }
}

double CostModel::run_seconds(const std::vector<CollectiveStep>& steps, const StepRun& run, const TensorMeta& t,
                              const Mesh& mesh) const {
  const CollectiveStep& first = steps[run.begin];
  return run_seconds(first.kind, run.lo_dim, run.hi_dim, first.reduce,
                     static_cast<double>(shard_bytes(t.shape, mesh, first.before, t.dtype)),
                     static_cast<double>(shard_bytes(t.shape, mesh, steps[run.end - 1].after, t.dtype)), mesh,
                     t.dtype);
}

double CostModel::redistribute_seconds(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& src,
                                       const PlacementSpec& dst) const {
  // Malformed specs are errors; a well-formed transition DTensor refuses is
  // merely infeasible (+infinity lets the solver rule it out).
  PlacementSpec s = src, d = dst;
  validate_spec(s, t.ndim(), mesh.ndim(), "source placements");
  validate_spec(d, t.ndim(), mesh.ndim(), "target placements");
  if (!can_redistribute(s, d)) return std::numeric_limits<double>::infinity();
  const std::vector<CollectiveStep> steps = plan_redistribute(t.shape, mesh, s, d).steps;
  double total = 0;
  for (const StepRun& run : merged_step_runs(steps, t.shape, mesh)) total += run_seconds(steps, run, t, mesh);
  return total;
}

int64_t CostModel::local_bytes(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& spec) const {
  return shard_bytes(t.shape, mesh, spec, t.dtype);
}

}  // namespace tlm
