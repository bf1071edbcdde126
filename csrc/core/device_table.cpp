// The device table: vendor datasheet figures for each supported device and its
// usual node topology. Every number's source is listed in docs/cost_model.md
// ("Device table"); change both together.
#include <algorithm>
#include <cctype>

#include "core/cost_model.h"

namespace tlm {

namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;

// Tensor-core rates are the datasheets' dense figures (half of the "with
// sparsity" numbers). fp32 is the non-tensor-core rate: PyTorch does not use
// TF32 for float32 matmuls by default (torch.backends.cuda.matmul.allow_tf32).
DeviceProfile make_h100() {
  DeviceProfile d;
  d.name = "H100";
  d.peak_flops_fp64 = 67 * kTera;  // FP64 Tensor Core
  d.peak_flops_fp32 = 67 * kTera;
  d.peak_flops_bf16 = 989.5 * kTera;
  d.peak_flops_fp8 = 1979 * kTera;
  d.memory_bandwidth = 3350 * kGiga;
  d.memory_capacity = 80 * kGiga;
  d.kernel_overhead_s = 4e-6;
  return d;
}

DeviceProfile make_h200() {  // same GH100 compute as H100 SXM, larger and faster HBM3e
  DeviceProfile d = make_h100();
  d.name = "H200";
  d.memory_bandwidth = 4800 * kGiga;
  d.memory_capacity = 141 * kGiga;
  return d;
}

DeviceProfile make_a100() {
  DeviceProfile d;
  d.name = "A100";
  d.peak_flops_fp64 = 19.5 * kTera;  // FP64 Tensor Core
  d.peak_flops_fp32 = 19.5 * kTera;
  d.peak_flops_bf16 = 312 * kTera;
  d.peak_flops_fp8 = 312 * kTera;  // no FP8 tensor cores: fp8 data is computed at the bf16 rate
  d.memory_bandwidth = 2039 * kGiga;
  d.memory_capacity = 80 * kGiga;
  d.kernel_overhead_s = 4e-6;
  return d;
}

DeviceProfile make_b200() {  // HGX B200 (1000 W) per-GPU figures
  DeviceProfile d;
  d.name = "B200";
  d.peak_flops_fp64 = 37 * kTera;
  d.peak_flops_fp32 = 75 * kTera;
  d.peak_flops_bf16 = 2250 * kTera;
  d.peak_flops_fp8 = 4500 * kTera;
  d.memory_bandwidth = 7700 * kGiga;
  d.memory_capacity = 180 * kGiga;
  d.kernel_overhead_s = 4e-6;
  return d;
}

// One socket of an AMD EPYC 9654 (96 Zen 4 cores, 2.4 GHz base, 12 channels
// DDR5-4800). FLOP/s = cores * clock * FLOP per cycle per core.
DeviceProfile make_cpu() {
  DeviceProfile d;
  d.name = "cpu";
  const double cycles = 96 * 2.4 * kGiga;
  d.peak_flops_fp32 = cycles * 32;  // 2 x 256-bit FMA pipes: 16 fp32 FMAs = 32 FLOP / cycle
  d.peak_flops_fp64 = cycles * 16;
  d.peak_flops_bf16 = cycles * 64;  // AVX512_BF16 dot products: twice the fp32 element rate
  d.peak_flops_fp8 = d.peak_flops_bf16;  // no fp8 arithmetic: converted and computed as bf16
  d.memory_bandwidth = 12 * 38.4 * kGiga;  // 12 channels x DDR5-4800 x 8 bytes
  d.memory_capacity = 12 * 64 * kGiga;     // one 64 GB RDIMM per channel
  d.kernel_overhead_s = 5e-6;              // eager PyTorch CPU op dispatch (assumption, calibrate)
  return d;
}

struct Entry {
  DeviceProfile profile;
  Topology topology;
};

// NCCL's per-step hardware latencies (src/graph/tuning.cc, hwLat, Ring/LL128):
// NVLink 1.9 us, network 4.0 us.
constexpr double kNvlinkLatency = 1.9e-6;
constexpr double kNetLatency = 4.0e-6;

Topology gpu_node(double nvlink_bidirectional, double nic_gbit) {
  Topology t;
  t.ranks_per_node = 8;
  t.intra_bandwidth = nvlink_bidirectional / 2;  // datasheets give both directions summed
  t.inter_bandwidth = nic_gbit * kGiga / 8;      // one NIC per GPU
  t.intra_latency = kNvlinkLatency;
  t.inter_latency = kNetLatency;
  return t;
}

Topology cpu_node() {
  // Two ranks per node (one per socket of a dual-socket server). Intra-node:
  // gloo over loopback TCP, as fitted on our dev machine by
  // benchmarks/calibrate_collectives.py (all_reduce / all_to_all fits,
  // docs/cost_model.md). Inter-node: one 10 GbE NIC shared by the node's two
  // ranks; latency = loopback latency + a datacenter TCP round trip (assumed 50 us).
  Topology t;
  t.ranks_per_node = 2;
  t.intra_bandwidth = 0.8 * kGiga;
  t.intra_latency = 100e-6;
  t.inter_bandwidth = 10 * kGiga / 8 / 2;
  t.inter_latency = 150e-6;
  return t;
}

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = {
      {make_h100(), gpu_node(900 * kGiga, 400)},
      {make_h200(), gpu_node(900 * kGiga, 400)},
      {make_a100(), gpu_node(600 * kGiga, 200)},
      {make_b200(), gpu_node(1800 * kGiga, 400)},
      {make_cpu(), cpu_node()},
  };
  return entries;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

const Entry& find_entry(const std::string& name) {
  const std::string key = lower(name);
  for (const auto& e : table())
    if (lower(e.profile.name) == key) return e;
  std::string known;
  for (const auto& n : device_names()) known += std::string(known.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown device '" + name + "' (expected one of: " + known + ")");
}

}  // namespace

std::vector<std::string> device_names() {
  std::vector<std::string> names;
  for (const auto& e : table()) names.push_back(e.profile.name);
  return names;
}

const DeviceProfile& device_profile(const std::string& name) { return find_entry(name).profile; }

Topology default_topology(const std::string& device_name) { return find_entry(device_name).topology; }

}  // namespace tlm
