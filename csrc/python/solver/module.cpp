// torch_localmap._solver: the strategy solver on its own, without libtorch.
//
// `python -m torch_localmap solve` and `torch_localmap.solve()` use this module, so a
// solve's time limit is not spent loading torch (3-8 s on a loaded 2-core machine).
// It is built from csrc/core/solver and csrc/core/json only; _C (the planner) has its
// own copy of the same code and raises this module's exception classes
// (csrc/python/bind_solver_link.cpp).
#include "python/bindings.h"

PYBIND11_MODULE(_solver, m) {
  m.doc() = "torch_localmap strategy solver (torch-free): problems, solve, evaluate";
  tlm::pybind::bind_solver(m);
}
