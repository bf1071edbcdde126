// Builds small planner IR graphs for strategy tests.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "core/graph.h"
#include "core/strategy.h"

namespace tlm::test {

struct Input {
  std::vector<int64_t> shape;
  std::string dtype = "float32";
};

inline std::string shape_json(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// A graph of placeholders (one per input) followed by one op node whose args
// are `args_json` with "$k" standing for the k-th placeholder.
inline Graph one_op_graph(const std::vector<int64_t>& mesh, const std::vector<Input>& inputs, const std::string& op,
                          std::string args_json, const std::vector<Input>& outputs,
                          const std::string& kwargs_json = "{}") {
  std::string nodes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    nodes += "{\"name\":\"in" + std::to_string(i) + "\",\"op\":\"placeholder\",\"role\":\"input\",\"outputs\":[{\"shape\":" +
             shape_json(inputs[i].shape) + ",\"dtype\":\"" + inputs[i].dtype + "\"}]},";
  }
  for (size_t i = inputs.size(); i-- > 0;) {
    const std::string key = "$" + std::to_string(i);
    const std::string ref = "{\"t\":[" + std::to_string(i) + ",0]}";
    for (size_t p; (p = args_json.find(key)) != std::string::npos;) args_json.replace(p, key.size(), ref);
  }
  std::string outs;
  for (size_t i = 0; i < outputs.size(); ++i)
    outs += (i ? "," : "") + std::string("{\"shape\":") + shape_json(outputs[i].shape) + ",\"dtype\":\"" +
            outputs[i].dtype + "\"}";
  nodes += "{\"name\":\"op\",\"op\":\"" + op + "\",\"args\":" + args_json + ",\"kwargs\":" + kwargs_json +
           ",\"outputs\":[" + outs + "]},";
  nodes += "{\"name\":\"output\",\"op\":\"output\",\"args\":[[{\"t\":[" + std::to_string(inputs.size()) + ",0]}]]}";
  return read_graph("{\"mesh\":{\"shape\":" + shape_json(mesh) + "},\"nodes\":[" + nodes + "]}");
}

// "S(0)R,R->S(0)R" style rendering of a strategy, for exact comparisons.
inline std::string render(const OpStrategy& s) {
  std::string out;
  for (size_t i = 0; i < s.inputs.size(); ++i) out += (i ? "," : "") + to_string(s.inputs[i]);
  out += "->";
  for (size_t i = 0; i < s.outputs.size(); ++i) out += (i ? "," : "") + to_string(s.outputs[i]);
  return out;
}

inline std::vector<std::string> render_all(const NodeStrategies& ns) {
  std::vector<std::string> out;
  for (const auto& s : ns.strategies) out.push_back(render(s));
  return out;
}

// The rendered strategies of a one_op_graph's op (the node before the output).
inline std::vector<std::string> op_strategies(const Graph& g) {
  return render_all(enumerate_strategies(g, static_cast<int>(g.nodes.size()) - 2));
}

inline bool has(const std::vector<std::string>& all, const std::string& s) {
  return std::find(all.begin(), all.end(), s) != all.end();
}

inline OpStrategy strategy(const std::vector<std::string>& ins, const std::vector<std::string>& outs) {
  OpStrategy s;
  for (const auto& x : ins) s.inputs.push_back(parse_spec(x));
  for (const auto& x : outs) s.outputs.push_back(parse_spec(x));
  return s;
}

}  // namespace tlm::test
