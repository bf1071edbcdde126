#include "core/calibration.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <utility>

namespace tlm {

namespace {

// The ring-form regressors of one sample: (algorithm steps, bytes on the wire per rank).
std::pair<double, double> regressors(CollectiveKind kind, const CollectiveSample& s) {
  const double n = static_cast<double>(s.group_size);
  const double factor = kind == CollectiveKind::AllReduce ? 2.0 : 1.0;
  return {factor * (n - 1), factor * (n - 1) / n * s.bytes};
}

std::string fit_name(CollectiveKind kind, bool inter) {
  return std::string("calibration collectives ") + collective_name(kind) + " (" + (inter ? "inter" : "intra") + ")";
}

// A number field that must be finite and satisfy `ok`; `rule` says which.
double number(const json::Value& v, const std::string& what, const std::function<bool(double)>& ok,
              const char* rule) {
  const double x = v.as_double(what);
  if (!std::isfinite(x) || !ok(x)) throw InvalidArgument(what + ": expected a number " + rule + ", got " + v.dump());
  return x;
}
bool positive(double x) { return x > 0; }
bool non_negative(double x) { return x >= 0; }
bool fraction(double x) { return x > 0 && x <= 1; }

// Rejects keys outside `allowed`, so a typo is an error rather than a silent default.
void check_keys(const json::Value& obj, const std::string& what, const std::vector<std::string>& allowed) {
  for (const auto& kv : obj.as_object(what)) {
    if (std::find(allowed.begin(), allowed.end(), kv.first) != allowed.end()) continue;
    std::string list;
    for (const auto& a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
    throw json::SchemaError(what + ": unknown field '" + kv.first + "' (expected one of: " + list + ")");
  }
}

void apply_device(DeviceProfile& d, const json::Value& obj) {
  const std::string w = "calibration.device";
  struct Field {
    const char* key;
    double* target;
    bool (*ok)(double);
    const char* rule;
  };
  const Field fields[] = {
      {"peak_flops_fp32", &d.peak_flops_fp32, positive, "> 0"},
      {"peak_flops_bf16", &d.peak_flops_bf16, positive, "> 0"},
      {"peak_flops_fp8", &d.peak_flops_fp8, positive, "> 0"},
      {"peak_flops_fp64", &d.peak_flops_fp64, positive, "> 0"},
      {"memory_bandwidth", &d.memory_bandwidth, positive, "> 0"},
      {"memory_capacity", &d.memory_capacity, positive, "> 0"},
      {"compute_efficiency", &d.compute_efficiency, fraction, "in (0, 1]"},
      {"memory_efficiency", &d.memory_efficiency, fraction, "in (0, 1]"},
      {"kernel_overhead_s", &d.kernel_overhead_s, non_negative, ">= 0"},
      {"optimizer_kernel_overhead_s", &d.optimizer_kernel_overhead_s, non_negative, ">= 0"},
      {"optimizer_bandwidth", &d.optimizer_bandwidth, non_negative, ">= 0"},
      {"matmul_half_dim", &d.matmul_half_dim, non_negative, ">= 0"},
      {"attention_half_dim", &d.attention_half_dim, non_negative, ">= 0"},
      {"attention_causal_tile", &d.attention_causal_tile, non_negative, ">= 0"},
  };
  std::vector<std::string> allowed;
  for (const auto& f : fields) allowed.push_back(f.key);
  check_keys(obj, w, allowed);
  for (const auto& f : fields)
    if (const json::Value* v = obj.find(f.key)) *f.target = number(*v, w + "." + f.key, f.ok, f.rule);
}

void apply_topology(Topology& t, const json::Value& obj) {
  const std::string w = "calibration.topology";
  check_keys(obj, w, {"ranks_per_node", "intra_bandwidth", "inter_bandwidth", "intra_latency", "inter_latency"});
  if (const json::Value* v = obj.find("ranks_per_node")) {
    const int64_t r = v->as_int(w + ".ranks_per_node");
    if (r < 1) throw InvalidArgument(w + ".ranks_per_node: expected an integer >= 1, got " + std::to_string(r));
    t.ranks_per_node = r;
  }
  if (const json::Value* v = obj.find("intra_bandwidth")) t.intra_bandwidth = number(*v, w + ".intra_bandwidth", positive, "> 0");
  if (const json::Value* v = obj.find("inter_bandwidth")) t.inter_bandwidth = number(*v, w + ".inter_bandwidth", positive, "> 0");
  if (const json::Value* v = obj.find("intra_latency")) t.intra_latency = number(*v, w + ".intra_latency", non_negative, ">= 0");
  if (const json::Value* v = obj.find("inter_latency")) t.inter_latency = number(*v, w + ".inter_latency", non_negative, ">= 0");
}

// Groups measurements by (collective, link) in a deterministic order.
std::map<std::pair<CollectiveKind, bool>, std::vector<CollectiveSample>> read_samples(const json::Value& arr) {
  std::map<std::pair<CollectiveKind, bool>, std::vector<CollectiveSample>> groups;
  const auto& items = arr.as_array("calibration.collectives");
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string w = "calibration.collectives[" + std::to_string(i) + "]";
    const json::Value& item = items[i];
    check_keys(item, w, {"collective", "group_size", "bytes", "seconds", "link"});
    CollectiveKind kind;
    try {
      kind = parse_collective_name(item.at("collective", w).as_string(w + ".collective"));
    } catch (const json::SchemaError&) {
      throw;
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(w + ".collective: " + e.what());
    }
    bool inter = false;
    if (const json::Value* l = item.find("link")) {
      const std::string& s = l->as_string(w + ".link");
      if (s != "intra" && s != "inter")
        throw InvalidArgument(w + ".link: expected \"intra\" or \"inter\", got \"" + s + "\"");
      inter = s == "inter";
    }
    CollectiveSample s;
    s.group_size = item.at("group_size", w).as_int(w + ".group_size");
    if (s.group_size < 2)
      throw InvalidArgument(w + ".group_size: expected an integer >= 2, got " + std::to_string(s.group_size));
    s.bytes = number(item.at("bytes", w), w + ".bytes", positive, "> 0");
    s.seconds = number(item.at("seconds", w), w + ".seconds", positive, "> 0");
    groups[{kind, inter}].push_back(s);
  }
  return groups;
}

}  // namespace

CollectiveFit fit_collective(CollectiveKind kind, bool inter, const std::vector<CollectiveSample>& samples) {
  const std::string what = fit_name(kind, inter);
  if (!is_communicating(kind)) throw InvalidArgument(what + ": only communicating collectives can be calibrated");
  // Normal equations of  t = a * steps + b * wire  (a = latency, b = 1/bandwidth), each
  // sample weighted by 1/t^2: the relative error is minimised. Unweighted, the largest size
  // (tens of ms) sets the line and the small collectives most plans issue come out at half
  // their measured time.
  double s11 = 0, s12 = 0, s22 = 0, s1t = 0, s2t = 0;
  for (const auto& s : samples) {
    if (s.group_size < 2 || !(s.bytes > 0) || !(s.seconds > 0))
      throw InvalidArgument(what + ": samples need group_size >= 2, bytes > 0 and seconds > 0");
    const auto [x1, x2] = regressors(kind, s);
    const double w = 1.0 / (s.seconds * s.seconds);
    s11 += w * x1 * x1;
    s12 += w * x1 * x2;
    s22 += w * x2 * x2;
    s1t += w * x1 * s.seconds;
    s2t += w * x2 * s.seconds;
  }
  const double det = s11 * s22 - s12 * s12;
  // Collinear regressors (one size only) leave latency and bandwidth undetermined.
  if (samples.size() < 2 || !(det > 1e-9 * s11 * s22))
    throw InvalidArgument(what + ": needs timings at two or more distinct sizes (per-rank bytes / group size) " +
                          "to fit latency and bandwidth, got " + std::to_string(samples.size()) + " sample(s)");
  double a = (s22 * s1t - s12 * s2t) / det;
  double b = (s11 * s2t - s12 * s1t) / det;
  if (a < 0) {  // non-negative least squares: latency pinned at 0, refit the slope alone
    a = 0;
    b = s2t / s22;
  }
  if (!(b > 0))
    throw InvalidArgument(what + ": measured time does not grow with bytes, so no bandwidth can be fitted");
  CollectiveFit f;
  f.kind = kind;
  f.inter = inter;
  f.latency = a;
  f.bandwidth = 1.0 / b;
  f.samples = static_cast<int64_t>(samples.size());
  return f;
}

void apply_calibration(CostModel& model, const json::Value& profile) {
  const std::string w = "calibration";
  check_keys(profile, w, {"version", "device", "topology", "collectives", "meta"});
  if (const json::Value* v = profile.find("version")) {
    const int64_t version = v->as_int("calibration.version");
    if (version != 1) throw InvalidArgument("calibration.version: expected 1, got " + std::to_string(version));
  }
  if (const json::Value* v = profile.find("device")) apply_device(model.device, *v);
  if (const json::Value* v = profile.find("topology")) apply_topology(model.topology, *v);
  if (const json::Value* v = profile.find("collectives")) {
    model.fits.clear();
    for (const auto& [key, samples] : read_samples(*v))
      model.fits.push_back(fit_collective(key.first, key.second, samples));
  }
}

CostModel make_cost_model(const std::string& device_name, const std::string& calibration_json) {
  CostModel m;
  m.device = device_profile(device_name);
  m.topology = default_topology(device_name);
  bool blank = true;
  for (char c : calibration_json)
    if (!std::isspace(static_cast<unsigned char>(c))) blank = false;
  if (!blank) {
    json::Value profile;
    try {
      profile = json::parse(calibration_json);
    } catch (const json::ParseError& e) {
      throw json::ParseError(std::string("calibration profile is not valid JSON: ") + e.what());
    }
    apply_calibration(m, profile);
  }
  return m;
}

}  // namespace tlm
