#include "core/collective_cost.h"

#include <algorithm>

namespace tlm {

const char* to_string(GroupTopology::Kind k) {
  switch (k) {
    case GroupTopology::Kind::Single: return "single";
    case GroupTopology::Kind::Intra: return "intra";
    case GroupTopology::Kind::Inter: return "inter";
    case GroupTopology::Kind::Hierarchical: return "hierarchical";
    case GroupTopology::Kind::Mixed: return "mixed";
  }
  return "?";
}

GroupTopology group_topology(const Mesh& mesh, int mesh_dim, int64_t ranks_per_node) {
  if (mesh_dim < 0 || static_cast<size_t>(mesh_dim) >= mesh.ndim())
    throw InvalidArgument("mesh dim " + std::to_string(mesh_dim) + " is outside mesh " + mesh.to_string() +
                          " (expected 0.." + std::to_string(static_cast<int64_t>(mesh.ndim()) - 1) + ")");
  if (ranks_per_node < 1)
    throw InvalidArgument("ranks_per_node must be >= 1, got " + std::to_string(ranks_per_node));
  GroupTopology g;
  g.size = mesh.shape[mesh_dim];
  if (g.size == 1) return g;  // Single
  // Group members are `stride` ranks apart (row-major layout, like DeviceMesh).
  int64_t stride = 1;
  for (size_t d = mesh_dim + 1; d < mesh.ndim(); ++d) stride *= mesh.shape[d];
  const int64_t span = stride * g.size;  // ranks covered by one block of groups
  if (mesh.size() <= ranks_per_node || ranks_per_node % span == 0) {
    g.kind = GroupTopology::Kind::Intra;
  } else if (stride % ranks_per_node == 0) {
    g.kind = GroupTopology::Kind::Inter;
  } else if (ranks_per_node % stride == 0 && g.size % (ranks_per_node / stride) == 0) {
    // Blocks of `span` ranks are whole multiples of a node, so each group has
    // exactly ranks_per_node/stride members on each node it touches.
    g.kind = GroupTopology::Kind::Hierarchical;
    g.local = ranks_per_node / stride;
    g.nodes = g.size / g.local;
  } else {
    g.kind = GroupTopology::Kind::Mixed;
  }
  return g;
}

bool is_communicating(CollectiveKind k) {
  return k == CollectiveKind::AllGather || k == CollectiveKind::ReduceScatter || k == CollectiveKind::AllReduce ||
         k == CollectiveKind::AllToAll;
}

namespace {
struct KindName {
  CollectiveKind kind;
  const char* name;
};
constexpr KindName kKindNames[] = {
    {CollectiveKind::AllGather, "all_gather"},   {CollectiveKind::ReduceScatter, "reduce_scatter"},
    {CollectiveKind::AllReduce, "all_reduce"},   {CollectiveKind::AllToAll, "all_to_all"},
    {CollectiveKind::LocalChunk, "local_chunk"}, {CollectiveKind::LocalPartition, "local_partition"},
};
}  // namespace

const char* collective_name(CollectiveKind k) {
  for (const auto& kn : kKindNames)
    if (kn.kind == k) return kn.name;
  return "?";
}

CollectiveKind parse_collective_name(const std::string& name, bool communicating_only) {
  std::string known;
  for (const auto& kn : kKindNames) {
    if (communicating_only && !is_communicating(kn.kind)) continue;
    if (name == kn.name) return kn.kind;
    known += std::string(known.empty() ? "" : ", ") + kn.name;
  }
  throw InvalidArgument("unknown collective '" + name + "' (expected one of: " + known + ")");
}

int64_t ceil_log2(int64_t n) {
  int64_t k = 0;
  while ((int64_t{1} << k) < n) ++k;
  return k;
}

double ring_gather_seconds(int64_t n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  return static_cast<double>(n - 1) * (link.latency + bytes / static_cast<double>(n) / link.bandwidth);
}

double ring_allreduce_seconds(int64_t n, double bytes, const Link& link) {
  return 2 * ring_gather_seconds(n, bytes, link);
}

double tree_allreduce_seconds(int64_t n, double bytes, const Link& link) {
  if (n <= 1) return 0;
  return 2 * static_cast<double>(ceil_log2(n)) * link.latency + 2 * bytes / link.bandwidth;
}

double alltoall_seconds(int64_t n, double bytes, const Link& link) {
  // Same count of steps and bytes per step as the ring all-gather: each rank
  // sends bytes/n to each of its n-1 peers, one peer per step.
  return ring_gather_seconds(n, bytes, link);
}

double hierarchical_ring_seconds(int64_t local, int64_t nodes, double bytes, const Link& intra, const Link& inter) {
  const int64_t n = local * nodes;
  if (n <= 1) return 0;
  return static_cast<double>(n - nodes) * intra.latency + static_cast<double>(nodes - 1) * inter.latency +
         static_cast<double>(n - 1) * (bytes / static_cast<double>(n)) / inter.bandwidth;
}

double hierarchical_tree_allreduce_seconds(int64_t local, int64_t nodes, double bytes, const Link& intra,
                                           const Link& inter) {
  if (local * nodes <= 1) return 0;
  return 2 * (static_cast<double>(ceil_log2(local)) * intra.latency +
              static_cast<double>(ceil_log2(nodes)) * inter.latency) +
         2 * bytes / std::min(intra.bandwidth, inter.bandwidth);
}

double hierarchical_alltoall_seconds(int64_t local, int64_t nodes, double bytes, const Link& intra,
                                     const Link& inter) {
  const int64_t n = local * nodes;
  const double chunk = bytes / static_cast<double>(n);
  return static_cast<double>(local - 1) * (intra.latency + chunk / intra.bandwidth) +
         static_cast<double>(n - local) * (inter.latency + chunk / inter.bandwidth);
}

}  // namespace tlm
