// Lower bounds by message passing on the reduced model (sequential
// tree-reweighted passes, written as explicit reparameterisation).
//
// The model's cost is split into node potentials pot_i(s) and edge
// potentials mat_e(s,t) + phi_eu(s) + phi_ev(t); every update moves cost
// between a node and an edge without changing the total of any labelling,
// so sum_i min pot_i + sum_e min edge_e is a valid lower bound at every
// moment, whatever the messages converged to. Memory is handled by a
// Lagrangian: residual usage times the node's summed multipliers is added to
// its cost, and sum_k lambda_k * cap_k subtracted from the bound.
#pragma once

#include <memory>
#include <vector>

#include "core/solver/factored_costs.h"
#include "core/solver/model.h"

namespace tlm::solver {

class DualSolver {
 public:
  // The model's edge costs factored into distinct rows and columns
  // (factored_costs.h), as doubles (+inf = forbidden). Built once and shared
  // by the solvers of one model.
  using EdgeCosts = std::shared_ptr<const FactoredCosts>;
  static EdgeCosts edge_costs(const Model& m) { return factor_edge_costs(m); }

  DualSolver(const Model& m, EdgeCosts mat);
  explicit DualSolver(const Model& m) : DualSolver(m, edge_costs(m)) {}

  // Adds usage * delta[i] to node i's potentials (penalty change of node i).
  void add_penalty(const std::vector<double>& delta);
  // Adds delta[k] to model strategy k's potential (any other Lagrangian term).
  void add_potentials(const std::vector<double>& delta);
  // One forward pass; fills `labels` with the labelling decoded on the way.
  void forward(std::vector<int>& labels);
  void backward();
  // Sum of node minima (valid after a full pass up to rounding: edges are left with minimum 0).
  double quick_bound() const;
  // Exact sum of node and edge minima, in long double.
  long double exact_bound(long double* magnitude = nullptr) const;
  // Node potential minus its minimum: how much choosing s costs above the bound.
  double reduced_cost(int i, int s) const;
  double node_min(int i) const;
  // reduced_cost(i, s) for every model strategy.
  std::vector<double> reduced_costs() const;

 private:
  const Model& m_;
  std::vector<double> pot_;      // per model strategy
  EdgeCosts mat_;                // edge costs, +inf = forbidden
  std::vector<double> phi_;      // per edge: phi_u (|S_u|) then phi_v (|S_v|)
  std::vector<size_t> phi_off_;
  std::vector<int> n_before_, n_after_;  // neighbours earlier / later in the order
  std::vector<double> line_min_, class_best_;  // per row / column class, reused by collect

  void collect(int e, int i);           // move edge e's min-marginal into node i
  void push(int e, int i, double frac); // move frac * pot_i into edge e
};

}  // namespace tlm::solver
