// _C compiles its own copy of the solver (the planner calls it), separate from the
// torch-free module torch_localmap._solver that `solve()` uses. Python must still see
// one solver: this makes _C raise _solver's exception classes and load the HiGHS
// library _solver loaded.
#include <exception>

#include "python/bindings.h"
#include "core/solver/highs_api.h"
#include "core/solver/solver.h"

namespace py = pybind11;

namespace tlm::pybind {

void bind_solver_link(py::module_& m) {
  py::module_::import("torch_localmap.solver");  // finds highspy and hands it to _solver
  py::module_ solver_module = py::module_::import("torch_localmap._solver");
  py::dict status = solver_module.attr("highs_status")();
  if (status["loaded"].cast<bool>()) solver::set_highs_library(status["path"].cast<std::string>());

  // Held for the life of the process: translators run until the interpreter ends.
  static PyObject* infeasible = py::object(solver_module.attr("InfeasibleError")).release().ptr();
  static PyObject* milp_unavailable = py::object(solver_module.attr("MilpUnavailableError")).release().ptr();
  m.attr("InfeasibleError") = py::handle(infeasible);
  m.attr("MilpUnavailableError") = py::handle(milp_unavailable);
  // Registered last in module.cpp, so tried before the generic std::invalid_argument ->
  // ValueError translation that InfeasibleError would otherwise fall into.
  py::register_local_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const solver::InfeasibleError& e) {
      PyErr_SetString(infeasible, e.what());
    } catch (const solver::MilpUnavailableError& e) {
      PyErr_SetString(milp_unavailable, e.what());
    }
  });
}

}  // namespace tlm::pybind
