// The device table: one row of vendor datasheet figures per supported device,
// with its usual node topology. Every number's source is listed in
// docs/cost_model.md ("Device table"); change both together. A new device is a
// new row.
#include <algorithm>
#include <cctype>

#include "core/cost_model.h"

namespace tlm {

namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;

// NCCL's per-step hardware latencies (src/graph/tuning.cc, hwLat, Ring/LL128):
// NVLink 1.9 us, network 4.0 us.
constexpr double kNvlinkLatency = 1.9e-6;
constexpr double kNetLatency = 4.0e-6;

// One socket of an AMD EPYC 9654: 96 Zen 4 cores at 2.4 GHz.
constexpr double kEpycCycles = 96 * 2.4 * kGiga;

// Tensor-core rates are the datasheets' dense figures (half of the "with
// sparsity" numbers). fp32 is the non-tensor-core rate: PyTorch does not use
// TF32 for float32 matmuls by default (torch.backends.cuda.matmul.allow_tf32).
// Link bandwidths are per rank and per direction (datasheets sum both
// directions). Units: FLOP/s, bytes/s, bytes, seconds.
struct DeviceRow {
  const char* name;
  double fp64, fp32, bf16, fp8;
  double memory_bandwidth, memory_capacity, kernel_overhead_s;
  int64_t ranks_per_node;
  double intra_bandwidth, inter_bandwidth, intra_latency, inter_latency;
};

constexpr DeviceRow kDevices[] = {
    // H100 SXM: FP64 tensor core 67 TF; HBM3 3.35 TB/s, 80 GB; NVLink 900 GB/s; one 400 Gb/s NIC per GPU.
    {"H100", 67 * kTera, 67 * kTera, 989.5 * kTera, 1979 * kTera, 3350 * kGiga, 80 * kGiga, 4e-6,
     8, 900 * kGiga / 2, 400 * kGiga / 8, kNvlinkLatency, kNetLatency},
    // H200: the same GH100 compute as H100 SXM, larger and faster HBM3e.
    {"H200", 67 * kTera, 67 * kTera, 989.5 * kTera, 1979 * kTera, 4800 * kGiga, 141 * kGiga, 4e-6,
     8, 900 * kGiga / 2, 400 * kGiga / 8, kNvlinkLatency, kNetLatency},
    // A100 SXM: no FP8 tensor cores (fp8 data is computed at the bf16 rate); NVLink 600 GB/s, 200 Gb/s NIC.
    {"A100", 19.5 * kTera, 19.5 * kTera, 312 * kTera, 312 * kTera, 2039 * kGiga, 80 * kGiga, 4e-6,
     8, 600 * kGiga / 2, 200 * kGiga / 8, kNvlinkLatency, kNetLatency},
    // HGX B200 (1000 W) per-GPU figures; NVLink 1.8 TB/s, 400 Gb/s NIC.
    {"B200", 37 * kTera, 75 * kTera, 2250 * kTera, 4500 * kTera, 7700 * kGiga, 180 * kGiga, 4e-6,
     8, 1800 * kGiga / 2, 400 * kGiga / 8, kNvlinkLatency, kNetLatency},
    // EPYC 9654 socket: 2 x 256-bit FMA pipes = 32 fp32 / 16 fp64 FLOP per cycle; AVX512_BF16 twice
    // the fp32 rate; no fp8 arithmetic (computed as bf16). 12 channels DDR5-4800 x 8 bytes; one 64 GB
    // RDIMM per channel. Kernel overhead: eager PyTorch CPU op dispatch (an assumption; calibrate).
    // Two ranks per node (one per socket); intra-node gloo over loopback TCP as fitted by
    // benchmarks/calibrate_collectives.py; inter-node one 10 GbE NIC shared by the node's two ranks,
    // latency = loopback latency + a datacenter TCP round trip (assumed 50 us).
    {"cpu", kEpycCycles * 16, kEpycCycles * 32, kEpycCycles * 64, kEpycCycles * 64, 12 * 38.4 * kGiga,
     12 * 64 * kGiga, 5e-6, 2, 0.8 * kGiga, 10 * kGiga / 8 / 2, 100e-6, 150e-6},
};

DeviceProfile profile_of(const DeviceRow& r) {
  DeviceProfile d;
  d.name = r.name;
  d.peak_flops_fp64 = r.fp64;
  d.peak_flops_fp32 = r.fp32;
  d.peak_flops_bf16 = r.bf16;
  d.peak_flops_fp8 = r.fp8;
  d.memory_bandwidth = r.memory_bandwidth;
  d.memory_capacity = r.memory_capacity;
  d.kernel_overhead_s = r.kernel_overhead_s;
  return d;
}

Topology topology_of(const DeviceRow& r) {
  Topology t;
  t.ranks_per_node = r.ranks_per_node;
  t.intra_bandwidth = r.intra_bandwidth;
  t.inter_bandwidth = r.inter_bandwidth;
  t.intra_latency = r.intra_latency;
  t.inter_latency = r.inter_latency;
  return t;
}

struct Entry {
  DeviceProfile profile;
  Topology topology;
};

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> out;
    for (const auto& r : kDevices) out.push_back({profile_of(r), topology_of(r)});
    return out;
  }();
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
