// The strategy-selection problem, as plain data (shaped after google/iopddl).
//
// Pick one strategy per node; pay the chosen node costs plus, for every edge,
// the matrix entry of the two chosen strategies; keep the summed usage of the
// nodes alive at any time step under `usage_limit`. Our PyTorch graphs add
// couplings (a parameter and its gradient must share placements) and pins
// (local_map regions). Costs are integers (the planner uses picoseconds) so
// evaluation is exact; kInfiniteCost marks a forbidden choice.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tlm::solver {

using Cost = int64_t;
using Usage = int64_t;
constexpr Cost kInfiniteCost = std::numeric_limits<Cost>::max();

struct Strategy {
  Cost cost = 0;
  Usage usage = 0;
};

struct Node {
  int64_t start = 0, end = 0;  // liveness interval [start, end); empty when start >= end
  std::vector<Strategy> strategies;
  int pinned = -1;                   // >= 0: only this strategy is allowed
  std::optional<Usage> usage_lower;  // optional per-node bounds on the chosen usage
  std::optional<Usage> usage_upper;
};

// An edge's |S_u| x |S_v| matrix, row-major: (*costs)[su * |S_v| + sv]. Shared
// and read-only: a model's repeated layers give thousands of edges with equal
// matrices (tens of millions of entries on 3-D meshes), which the planner
// builds once and every stage reads in place. Change one by assigning a new one.
using CostMatrix = std::shared_ptr<const std::vector<Cost>>;

inline CostMatrix make_cost_matrix(std::vector<Cost> costs) {
  return std::make_shared<const std::vector<Cost>>(std::move(costs));
}

struct Edge {
  int u = 0, v = 0;
  CostMatrix costs;

  Edge() = default;
  Edge(int u_, int v_, std::vector<Cost> c) : u(u_), v(v_), costs(make_cost_matrix(std::move(c))) {}
  Edge(int u_, int v_, CostMatrix c) : u(u_), v(v_), costs(std::move(c)) {}
};

// Strategy s_u of node u forces strategy map[s_u] of node v (-1: s_u forbidden).
struct Coupling {
  int u = 0, v = 0;
  std::vector<int> map;
};

struct Problem {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  std::vector<Coupling> couplings;
  std::optional<Usage> usage_limit;
};

using Solution = std::vector<int>;  // one strategy index per node

// What the evaluator found: exact total (128-bit) and every violated constraint.
struct Evaluation {
  __int128 cost = 0;
  bool feasible = true;
  std::vector<std::string> violations;
  Usage peak_usage = 0;
  int64_t peak_time = 0;
};

Evaluation evaluate(const Problem& problem, const Solution& solution);

// The summed usage of the nodes alive at each time step 0..steps under `solution` (a start
// or end past `steps` counts at `steps`; nodes past solution.size() or labelled -1 count
// nothing).
std::vector<__int128> load_by_step(const Problem& problem, const Solution& solution, size_t steps);

// Throws std::invalid_argument naming the first inconsistency (edge matrix size,
// node index out of range, pinned index out of range, coupling map size, ...).
void validate(const Problem& problem);

std::string to_string(__int128 v);

}  // namespace tlm::solver
