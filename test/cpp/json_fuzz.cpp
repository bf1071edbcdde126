// Fuzzer for the JSON reader and the readers of what it parses: the planner IR
// (read_graph), plan options and calibration profiles. Built under
// AddressSanitizer and UBSan by test/cpp/cmake/solver_fuzz.cmake; `make test`
// runs it. (The sharding rules behind a graph that reads take IR written by the
// exporter from torch's own shape propagation; they are not fuzzed with
// contradictory shapes.)
//
// Inputs: valid seed documents, byte-level and structure-aware mutations of
// them (fuzz_mutate.h) and random text. Any exception other than
// std::invalid_argument (json::ParseError / SchemaError, InvalidArgument), or
// any sanitizer report, is a failure.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/cost_model.h"
#include "core/graph.h"
#include "core/plan_json.h"
#include "core/planner.h"
#include "fuzz_mutate.h"

using namespace tlm;

namespace {

std::string tensor(const std::string& shape, const char* dtype = "float32") {
  return R"({"shape": )" + shape + R"(, "dtype": ")" + dtype + R"("})";
}

// A small training graph (mm, view, softmax, sum, grads), in the exporter's format.
std::string ir_seed(const std::string& mesh) {
  const std::string t = tensor("[8, 6]"), v = tensor("[4, 2, 6]"), s = tensor("[]");
  return R"({"mesh": {"shape": )" + mesh + R"(, "dim_names": ["dp", "tp"]}, "nodes": [
    {"name": "w", "op": "placeholder", "role": "param", "extra": {"target": "w"}, "outputs": [)" + tensor("[6, 6]") + R"(]},
    {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [)" + t + R"(]},
    {"name": "y", "op": "aten.mm.default", "args": [{"t": [1, 0]}, {"t": [0, 0]}], "kwargs": {}, "outputs": [)" + t + R"(]},
    {"name": "r", "op": "aten.view.default", "args": [{"t": [2, 0]}, [4, 2, 6]], "kwargs": {}, "outputs": [)" + v + R"(]},
    {"name": "p", "op": "aten._softmax.default", "args": [{"t": [3, 0]}, -1, false], "kwargs": {}, "outputs": [)" + v + R"(]},
    {"name": "loss", "op": "aten.sum.default", "args": [{"t": [4, 0]}], "kwargs": {"dtype": {"dtype": "float32"}}, "outputs": [)" + s + R"(]},
    {"name": "f", "op": "aten.full.default", "args": [[8, 6], {"float": "inf"}], "kwargs": {"device": {"device": "cpu"}}, "outputs": [)" + t + R"(]},
    {"name": "xt", "op": "aten.t.default", "args": [{"t": [1, 0]}], "kwargs": {}, "outputs": [)" + tensor("[6, 8]") + R"(]},
    {"name": "gw", "op": "aten.mm.default", "args": [{"t": [7, 0]}, {"t": [6, 0]}], "kwargs": {}, "outputs": [)" + tensor("[6, 6]") + R"(]},
    {"name": "output", "op": "output", "args": [[{"t": [5, 0]}, {"t": [8, 0]}]],
     "extra": {"roles": ["output", "grad"], "targets": ["0", "w"]}}]})";
}

const char* kOptionSeed =
    R"({"mode": "train", "device": "H100", "time_limit": 1.5, "seed": 3, "threads": 2, "memory_limit": 1000000,
        "fixed_params": {"w": "S(0)R"}, "fallback_replicate": true})";
const char* kCalibrationSeed =
    R"({"device": {"peak_flops_fp32": 1e12, "memory_bandwidth": 1e11, "kernel_overhead_s": 1e-6},
        "collectives": [{"kind": "all_gather", "inter": false, "latency": 1e-5, "bandwidth": 1e10, "samples": 4}]})";

void exercise(const std::string& text) {
  tlm::fuzz::current_input() = text;
  try {
    json::Value doc = json::parse(text);
    try {
      read_graph(doc);
    } catch (const std::invalid_argument&) {
    }
    try {
      read_plan_options(doc);
    } catch (const std::invalid_argument&) {
    }
    try {
      make_cost_model("H100", text);
    } catch (const std::invalid_argument&) {
    }
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 30.0;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  const std::vector<std::string> seeds = {ir_seed("[2, 2]"), ir_seed("[4, 1]"), kOptionSeed, kCalibrationSeed};
  tlm::fuzz::watch_inputs("json_fuzz_failure.json");
  const auto t0 = std::chrono::steady_clock::now();
  long runs = 0;
  try {
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
      for (const std::string& doc : seeds) {
        exercise(doc);
        for (int k = 0; k < 5; ++k) exercise(fuzz::mutate_bytes(doc, rng));
        for (int k = 0; k < 5; ++k) exercise(fuzz::mutate_structure(doc, rng));
        runs += 11;
      }
      std::string noise(rng() % 64, ' ');
      for (auto& c : noise) c = static_cast<char>(rng() & 0xFF);
      exercise(noise);
      ++runs;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "json_fuzz: unexpected exception after %ld inputs: %s\n", runs, e.what());
    tlm::fuzz::save_input();
    return 1;
  }
  std::printf("json_fuzz: %ld inputs, no crash\n", runs);
  return 0;
}
