// IR graphs shared by the planner's GoogleTests.
#pragma once

#include <cstdint>
#include <string>

namespace tlm_test {

// w (param) and x (input) of n x n; loss = sum(x @ w); a stand-in "gradient" of w = x^T x.
inline std::string training_graph(int64_t n, const char* mesh) {
  std::string sz = std::to_string(n);
  std::string t = R"({"shape": [)" + sz + "," + sz + R"(], "dtype": "float32"})";
  return std::string(R"({"mesh": {"shape": )") + mesh + R"(}, "nodes": [
    {"name": "w", "op": "placeholder", "role": "param", "extra": {"target": "w"}, "outputs": [)" + t + R"(]},
    {"name": "x", "op": "placeholder", "role": "input", "extra": {"target": "0"}, "outputs": [)" + t + R"(]},
    {"name": "y", "op": "aten.mm.default", "args": [{"t": [1, 0]}, {"t": [0, 0]}], "outputs": [)" + t + R"(]},
    {"name": "loss", "op": "aten.sum.default", "args": [{"t": [2, 0]}], "outputs": [{"shape": [], "dtype": "float32"}]},
    {"name": "xt", "op": "aten.t.default", "args": [{"t": [1, 0]}], "outputs": [)" + t + R"(]},
    {"name": "gw", "op": "aten.mm.default", "args": [{"t": [4, 0]}, {"t": [1, 0]}], "outputs": [)" + t + R"(]},
    {"name": "output", "op": "output", "args": [[{"t": [3, 0]}, {"t": [5, 0]}]],
     "extra": {"roles": ["output", "grad"], "targets": ["0", "w"]}}]})";
}

}  // namespace tlm_test
