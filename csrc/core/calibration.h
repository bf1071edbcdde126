// Calibration profiles: measured constants that replace the device table's.
//
// A profile (JSON, schema in docs/cost_model.md) may override device and
// topology fields and list measured collective timings; per collective and
// link class the timings are fitted to the ring-form alpha-beta model
//   seconds = latency * steps + wire_bytes / bandwidth
// (steps = n-1 and wire_bytes = (n-1)/n * bytes; both doubled for all-reduce)
// by non-negative least squares, and the fit replaces the topology constants.
#pragma once

#include <vector>

#include "core/cost_model.h"
#include "core/json.h"

namespace tlm {

struct CollectiveSample {
  int64_t group_size = 2;
  double bytes = 0;  // per-rank buffer, nccl-tests convention (collective_cost.h)
  double seconds = 0;
};

// Throws InvalidArgument when the samples cannot determine both constants
// (fewer than two distinct sizes) or time does not grow with bytes.
CollectiveFit fit_collective(CollectiveKind kind, bool inter, const std::vector<CollectiveSample>& samples);

// Applies a parsed profile to `model` (overrides, then fits). Throws
// json::SchemaError / InvalidArgument naming the offending field.
void apply_calibration(CostModel& model, const json::Value& profile);

}  // namespace tlm
