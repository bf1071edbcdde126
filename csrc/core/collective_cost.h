// Collective time formulas (alpha-beta models) and the mapping of a mesh dim's
// process groups onto a node topology. Pure functions of numbers; the
// CostModel (cost_model.h) feeds them its constants or calibrated fits.
//
// Byte convention (the one nccl-tests uses for its "size" column): `bytes` is
// the per-rank buffer of the whole collective -- the gathered output of an
// all-gather, the unreduced input of a reduce-scatter, the buffer of an
// all-reduce, the send buffer of an all-to-all. Formulas: docs/cost_model.md.
#pragma once

#include <cstdint>
#include <string>

#include "core/mesh.h"
#include "core/redistribute.h"

namespace tlm {

// Latency per algorithm step and bandwidth per rank of one kind of link.
struct Link {
  double latency = 0;    // seconds per step
  double bandwidth = 0;  // bytes/s per rank per direction
};

// How the process groups of one mesh dim sit on nodes. Ranks are laid out
// row-major over the mesh and filled node by node (ranks_per_node per node).
struct GroupTopology {
  enum class Kind : uint8_t {
    Single,        // group of one rank: no communication
    Intra,         // every group inside one node (NVLink)
    Inter,         // every member of a group on a different node (one NIC per rank)
    Hierarchical,  // `local` members on each of `nodes` nodes, blocks aligned to nodes
    Mixed          // groups straddle node boundaries unevenly: priced on the slowest link
  };
  Kind kind = Kind::Single;
  int64_t size = 1;   // n = mesh.shape[mesh_dim]
  int64_t local = 1;  // members per node (Hierarchical)
  int64_t nodes = 1;  // nodes spanned (Hierarchical)
};
const char* to_string(GroupTopology::Kind k);

// Throws InvalidArgument for a mesh_dim outside the mesh or ranks_per_node < 1.
GroupTopology group_topology(const Mesh& mesh, int mesh_dim, int64_t ranks_per_node);

// The four communicating collectives; LocalChunk / LocalPartition are local
// copies priced by the roofline (see CostModel::step_seconds).
bool is_communicating(CollectiveKind k);
// "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "local_chunk",
// "local_partition" -- the spelling calibration profiles and Python use.
const char* collective_name(CollectiveKind k);
// Inverse of collective_name (only the four communicating ones when
// `communicating_only`); throws InvalidArgument listing the known names.
CollectiveKind parse_collective_name(const std::string& name, bool communicating_only = true);

// Ring all-gather / reduce-scatter on one link: (n-1) * (latency + bytes/n / bw).
double ring_gather_seconds(int64_t n, double bytes, const Link& link);
// Ring all-reduce = reduce-scatter + all-gather: 2 (n-1) * (latency + bytes/n / bw).
double ring_allreduce_seconds(int64_t n, double bytes, const Link& link);
// Pipelined tree all-reduce (reduce up, broadcast down; NCCL's tree model):
// 2 * ceil(log2 n) * latency + 2 * bytes / bw.
double tree_allreduce_seconds(int64_t n, double bytes, const Link& link);
// Pairwise-exchange all-to-all: (n-1) * (latency + bytes/n / bw).
double alltoall_seconds(int64_t n, double bytes, const Link& link);

// Ring all-gather / reduce-scatter through `nodes` nodes with `local` ranks
// each (NCCL's ring model, src/graph/tuning.cc): of the n-1 steps, nodes-1
// cross the network and n-nodes stay on NVLink; every step moves bytes/n per
// rank and is as slow as its slowest link, the network:
// (n-nodes) * intra.latency + (nodes-1) * inter.latency + (n-1) * bytes/n / inter.bandwidth.
double hierarchical_ring_seconds(int64_t local, int64_t nodes, double bytes, const Link& intra, const Link& inter);
// Tree all-reduce with binary trees inside each node and across nodes; the
// buffer streams up and down once through the slower link:
// 2 * (ceil(log2 local) * intra.latency + ceil(log2 nodes) * inter.latency) + 2 * bytes / min(bw).
double hierarchical_tree_allreduce_seconds(int64_t local, int64_t nodes, double bytes, const Link& intra,
                                           const Link& inter);
// Pairwise all-to-all where (local-1) peers are intra-node and (n-local) inter-node.
double hierarchical_alltoall_seconds(int64_t local, int64_t nodes, double bytes, const Link& intra,
                                     const Link& inter);

int64_t ceil_log2(int64_t n);

}  // namespace tlm
