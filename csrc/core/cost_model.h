// Cost model: compute time (roofline), collective time (ring/tree models over a
// node topology) and memory, all in seconds / bytes.
//
// Constants come from a device table (documented in docs/cost_model.md with
// sources) and can be replaced by a calibration profile (JSON) measured with
// benchmarks/calibrate_collectives.py.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collective_cost.h"
#include "core/json.h"
#include "core/redistribute.h"
#include "core/strategy.h"
#include "core/tensor_meta.h"

namespace tlm {

struct DeviceProfile {
  std::string name;
  double peak_flops_fp32 = 0;  // FLOP/s, dense
  double peak_flops_bf16 = 0;  // also fp16
  double peak_flops_fp8 = 0;
  double peak_flops_fp64 = 0;
  double memory_bandwidth = 0;  // bytes/s (HBM or DRAM)
  double memory_capacity = 0;   // bytes
  double compute_efficiency = 0.7;  // achievable fraction of peak FLOP/s
  double memory_efficiency = 0.8;   // achievable fraction of peak bandwidth
  double kernel_overhead_s = 0;     // fixed launch cost per op
  // Beyond kernel_overhead_s, per kernel of the optimizer step: it runs eagerly on the
  // parameters as the user holds them (DTensors), whose dispatch costs more per op than a
  // planned graph node. 0 in the table; live calibration measures it.
  double optimizer_kernel_overhead_s = 0;
  // Bytes/s the optimizer's update streams (the 3 + 8 x states shard-sized tensors of
  // optimizer_step_seconds) when measured: AdamW's element-wise kernels (sqrt, div, lerp,
  // addcdiv) over state larger than the caches run well below a copy's bandwidth (on the
  // 2-core VM with 4 ranks, 11 against 23 GB/s). 0: the roofline's memory bandwidth.
  double optimizer_bandwidth = 0;
  // A matmul whose smallest dimension (rows M, columns N or contracted K of its local
  // problem) is d runs at d / (d + matmul_half_dim) of the large-shape rate (Hockney's
  // n-half): skinny products (a few rows per rank) use the vector units poorly. On the
  // 2-core VM, float32 on one thread: 16 rows run at 0.45-0.75 of a large product's rate, 64
  // rows at 0.75-0.97. 0 in the table (no shape effect); live calibration measures it.
  double matmul_half_dim = 0;
  // Attention (SDPA, flex) whose head width (the products' contracted E) is e runs at
  // e / (e + attention_half_dim) of the matmul rate: besides its narrow products each score
  // pays its softmax. On the 2-core VM, float32 flash attention (not causal) on one thread ran
  // at 0.44-0.85 of a large product's rate at heads of 32-128 over 64-1024 keys, the narrow
  // heads and short sequences slowest. 0 in the table; live calibration measures it.
  double attention_half_dim = 0;
  // Causal attention skips the key tiles above the diagonal but computes the diagonal's
  // tiles whole, so over s keys it does min(1, (1 + tile / s) / 2) of the full scores, not
  // half: torch's CPU flash kernel cost as much causal as full up to 512 keys on the 2-core
  // VM, 0.74 of full at 1024. 0 in the table (half exactly); live calibration measures it.
  double attention_causal_tile = 0;
};

struct Topology {
  int64_t ranks_per_node = 8;
  double intra_bandwidth = 0;  // bytes/s per rank, inside a node (NVLink)
  double inter_bandwidth = 0;  // bytes/s per rank, across nodes (IB / RoCE)
  double intra_latency = 0;    // seconds per collective step
  double inter_latency = 0;
};

// Peak dense FLOP/s of `device` for an op computing in `dtype` (float64 ->
// fp64, float32 -> fp32, float16/bfloat16 -> bf16, float8 -> fp8, complex ->
// its real type, integers and bool -> fp32 rate; docs/cost_model.md).
double peak_flops(const DeviceProfile& device, DType dtype);

// Latency and bandwidth of one collective on one link class, fitted by least
// squares from measured timings (calibration profile, docs/cost_model.md).
// Used instead of the topology's constants for that collective and link.
struct CollectiveFit {
  CollectiveKind kind = CollectiveKind::AllGather;
  bool inter = false;    // fitted on inter-node groups (else intra-node)
  double latency = 0;    // seconds per algorithm step
  double bandwidth = 0;  // bytes/s per rank
  int64_t samples = 0;   // measurements the fit used
};

struct CostModel {
  DeviceProfile device;
  Topology topology;
  std::vector<CollectiveFit> fits;  // from a calibration profile; empty = formulas' constants

  // Roofline time of one op's work (from op_work in strategy.h); `dtype` picks
  // the peak FLOP/s (the planner passes the op's first output dtype).
  double compute_seconds(const OpWork& work, DType dtype) const;
  // Time of the optimizer's update of one parameter shard of `shard_bytes`
  // keeping `optimizer_states` tensors of its size (AdamW: 2), priced as
  // torch's per-parameter (for-loop) implementation runs it: 1 + 3 x states
  // streaming kernels (AdamW: 7) that read and write about 3 + 8 x states
  // shard-sized tensors in all (AdamW: 19). A replicated parameter is updated
  // whole on every rank, a sharded one in pieces: without this term the
  // solver would see replicated parameters as free.
  double optimizer_step_seconds(double shard_bytes, DType dtype, int optimizer_states) const;
  // Of that step, DTensor's dispatch (optimizer_kernel_overhead_s per kernel): what a
  // parameter held as a plain tensor does not pay (plain_state.h).
  double optimizer_dispatch_seconds(int optimizer_states) const;
  // Time to copy a collective's input of `bytes` into its bucket's flat buffer
  // (read + write): the runtime packs the members of a bucket with one cat
  // (_runtime/bucketing.py), so no kernel overhead per member. DDP's reducer
  // pays the same copy.
  double bucket_copy_seconds(double bytes) const;
  // Time of one collective over mesh dim `mesh_dim`'s process groups moving
  // `bytes` per rank (the nccl-tests convention: gathered output of an
  // all-gather, unreduced input of a reduce-scatter, the all-reduce buffer, the
  // all-to-all send buffer). Local kinds are not collectives: InvalidArgument.
  double collective_seconds(CollectiveKind kind, const Mesh& mesh, int mesh_dim, double bytes) const;
  // The same over the combined process groups of mesh dims lo_dim..hi_dim (consecutive):
  // one collective among the ranks that differ only in those dims, as the runtime issues
  // a merged chain of per-dim collectives (redistribute.h, merged_step_runs).
  double collective_seconds(CollectiveKind kind, const Mesh& mesh, int lo_dim, int hi_dim, double bytes) const;
  // The link constants `kind` is priced with: the calibrated fit when there is
  // one, else the topology's latency / bandwidth.
  Link link(CollectiveKind kind, bool inter) const;
  const CollectiveFit* fit(CollectiveKind kind, bool inter) const;
  // Time of one collective step (the step records shape and spec before it).
  double step_seconds(const CollectiveStep& step, const Mesh& mesh, DType dtype) const;
  // The same from the bytes of the largest local shard before and after the
  // step: a plan's steps depend on the specs only, so the cost tables plan
  // each spec pair once and price it for every tensor meta from cached bytes.
  double step_seconds(CollectiveKind kind, int mesh_dim, ReduceOp reduce, double bytes_before, double bytes_after,
                      const Mesh& mesh, DType dtype) const;
  // Time of a run of steps the runtime issues as one collective over mesh dims
  // lo_dim..hi_dim (one dim: a step), from the bytes of the largest local shard before its
  // first step and after its last; only gathers, scatters and all-reduces span dims.
  double run_seconds(CollectiveKind kind, int lo_dim, int hi_dim, ReduceOp reduce, double bytes_before,
                     double bytes_after, const Mesh& mesh, DType dtype) const;
  // The same for `run` of a plan's `steps` of tensor `t`.
  double run_seconds(const std::vector<CollectiveStep>& steps, const StepRun& run, const TensorMeta& t,
                     const Mesh& mesh) const;
  // Time to turn a tensor from `src` into `dst` (sum of its plan's steps, a merged run
  // priced as the one collective the runtime issues);
  // +infinity when DTensor refuses the transition.
  double redistribute_seconds(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& src,
                              const PlacementSpec& dst) const;
  // Bytes of the largest local shard of `t` under `spec`.
  int64_t local_bytes(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& spec) const;
};

// Known devices: the rows of device_table.cpp, in order (device_names();
// names match without case). Throws InvalidArgument listing them for an
// unknown name.
const DeviceProfile& device_profile(const std::string& name);
std::vector<std::string> device_names();
Topology default_topology(const std::string& device_name);

// Builds a cost model for a device, then applies an optional calibration
// profile (JSON text, see docs/cost_model.md); malformed profiles raise
// InvalidArgument / json::SchemaError naming the field.
CostModel make_cost_model(const std::string& device_name, const std::string& calibration_json = "");

}  // namespace tlm
