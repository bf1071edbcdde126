// torch_localmap._C: the Python entry into the C++ core (the solver on its own is
// torch_localmap._solver, csrc/python/solver/, which needs no libtorch).
//
// Data crosses in bulk (JSON documents, flat arrays), one call per graph or
// problem. C++ errors become Python exceptions: invalid input -> ValueError,
// anything else -> RuntimeError; nothing aborts the interpreter.
#include "python/bindings.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_localmap C++ core: placement algebra, strategies, cost model, solver";
  tlm::pybind::bind_core(m);
  tlm::pybind::bind_placement(m);
  tlm::pybind::bind_cost(m);
  tlm::pybind::bind_strategy(m);
  tlm::pybind::bind_planner(m);
  tlm::pybind::bind_local_map(m);
  tlm::pybind::bind_ops(m);
  tlm::pybind::bind_solver_link(m);  // last: its exception translator must be tried first
}
