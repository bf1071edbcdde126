// One bind_* function per area of the core; module.cpp calls them all.
// Each lives in its own bind_*.cpp so areas can grow independently.
#pragma once

#include <pybind11/pybind11.h>

namespace tlm::pybind {

void bind_placement(pybind11::module_& m);  // local layouts, redistribution plans
void bind_solver(pybind11::module_& m);  // strategy solver: problems, solve, evaluate (module _solver)
void bind_solver_link(pybind11::module_& m);  // _C raises _solver's exceptions, loads its HiGHS
void bind_cost(pybind11::module_& m);  // device table, collective / redistribution / compute prices
void bind_strategy(pybind11::module_& m);  // sharding strategies, per-rank call args, op work
void bind_core(pybind11::module_& m);     // placements, meshes, dtypes, IR validation
void bind_planner(pybind11::module_& m);  // plan a graph, per-rank call arguments
void bind_local_map(pybind11::module_& m);  // local_map region boundaries
void bind_ops(pybind11::module_& m);  // torch.ops.localmap kernels called directly (traced rank programs)

}  // namespace tlm::pybind
