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

#include "json.h"
#include "redistribute.h"
#include "strategy.h"
#include "tensor_meta.h"

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
};

struct Topology {
  int64_t ranks_per_node = 8;
  double intra_bandwidth = 0;  // bytes/s per rank, inside a node (NVLink)
  double inter_bandwidth = 0;  // bytes/s per rank, across nodes (IB / RoCE)
  double intra_latency = 0;    // seconds per collective step
  double inter_latency = 0;
};

struct CostModel {
  DeviceProfile device;
  Topology topology;

  // Roofline time of one op's work (from op_work in strategy.h); `dtype` picks
  // the peak FLOP/s (the planner passes the op's first output dtype).
  double compute_seconds(const OpWork& work, DType dtype) const;
  // Time of one collective step (the step records shape and spec before it).
  double step_seconds(const CollectiveStep& step, const Mesh& mesh, DType dtype) const;
  // Time to turn a tensor from `src` into `dst` (sum of its plan's steps);
  // +infinity when DTensor refuses the transition.
  double redistribute_seconds(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& src,
                              const PlacementSpec& dst) const;
  // Bytes of the largest local shard of `t` under `spec`.
  int64_t local_bytes(const TensorMeta& t, const Mesh& mesh, const PlacementSpec& spec) const;
};

// Known devices: "H100", "H200", "A100", "B200", "cpu". Throws InvalidArgument
// listing them for an unknown name.
const DeviceProfile& device_profile(const std::string& name);
std::vector<std::string> device_names();
Topology default_topology(const std::string& device_name);

// Builds a cost model for a device, then applies an optional calibration
// profile (JSON text, see docs/cost_model.md); malformed profiles raise
// InvalidArgument / json::SchemaError naming the field.
CostModel make_cost_model(const std::string& device_name, const std::string& calibration_json = "");

}  // namespace tlm
