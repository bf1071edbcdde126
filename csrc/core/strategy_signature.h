#pragma once

// What a node's strategies depend on, as one string: nodes with equal signatures get
// equal strategy lists, compute costs and memory per strategy, so the planner
// enumerates and prices one of them and copies the rest (a model's repeated layers:
// 80 copies of each op on a 70B graph).

#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"

namespace tlm {

// The signature of call node `id`: its op; its arguments with each tensor written as its
// shape and dtype and which earlier input it repeats (mul(x, x) is not mul(x, y)); its
// outputs' shapes and dtypes; what the exporter recorded on it except its block name;
// and the partial kinds its inputs can arrive in (`input_kinds`, as the rules see them).
// "" for a placeholder, the output node and a node with fixed placements (these are
// placed by other means, never copied).
std::string strategy_signature(const Graph& g, int id, const std::vector<uint8_t>& input_kinds);

}  // namespace tlm
