// The strategy solver in Python: a parsed problem object (parsed once in C++,
// never converted to Python lists), solve(), evaluate() and the solution file.
#include <map>
#include <Python.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "python/bindings.h"
#include "core/solver/highs_api.h"
#include "core/solver/milp.h"
#include "core/solver/problem_io.h"
#include "core/solver/solver.h"

namespace py = pybind11;

namespace tlm::pybind {
namespace {

py::object py_int(__int128 v) {
  std::string s = solver::to_string(v);
  PyObject* o = PyLong_FromString(s.c_str(), nullptr, 10);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

py::dict evaluation_dict(const solver::Evaluation& ev) {
  py::dict d;
  d["cost"] = py_int(ev.cost);
  d["feasible"] = ev.feasible;
  d["violations"] = ev.violations;
  d["peak_usage"] = ev.peak_usage;
  d["peak_time"] = ev.peak_time;
  return d;
}

}  // namespace

void bind_solver(py::module_& m) {
  py::register_exception<solver::InfeasibleError>(m, "InfeasibleError", PyExc_ValueError);
  py::register_exception<solver::MilpUnavailableError>(m, "MilpUnavailableError", PyExc_RuntimeError);

  py::class_<solver::Problem>(m, "SolverProblem", "A strategy-selection problem parsed in C++ (see problem.h).")
      .def_static(
          "from_json",
          [](const std::string& text) {
            py::gil_scoped_release nogil;
            return solver::read_problem(text);
          },
          py::arg("text"), "Parses our problem JSON or the IOPDDL contest format.")
      .def_readonly("name", &solver::Problem::name)
      .def_property_readonly("num_nodes", [](const solver::Problem& p) { return p.nodes.size(); })
      .def_property_readonly("num_edges", [](const solver::Problem& p) { return p.edges.size(); })
      .def_property_readonly("usage_limit", [](const solver::Problem& p) { return p.usage_limit; })
      .def("to_json", &solver::write_problem)
      .def(
          "evaluate",
          [](const solver::Problem& p, const std::vector<int>& x) { return evaluation_dict(solver::evaluate(p, x)); },
          py::arg("solution"), "Exact cost and every violated constraint of a solution.")
      .def("solution_json", &solver::write_solution, py::arg("solution"), py::arg("extra_members") = "",
           "The solution file: {problem, solution, cost, feasible, <extra members>}.")
      .def(
          "solve",
          [](const solver::Problem& p, double time_limit, uint64_t seed, int threads, bool exact,
             std::function<void(double, py::object, double)> progress, double gap_tolerance,
             const std::map<std::string, double>& search_options) {
            solver::SolveOptions o;
            o.time_limit_s = time_limit;
            o.seed = seed;
            o.threads = threads;
            o.exact = exact;
            o.gap_tolerance = gap_tolerance;
            for (const auto& kv : search_options) solver::set_search_option(o.search, kv.first, kv.second);
            if (progress)
              o.on_progress = [progress](double t, __int128 c, double b) {
                py::gil_scoped_acquire gil;
                progress(t, py_int(c), b);
              };
            solver::SolveResult r;
            {
              py::gil_scoped_release nogil;
              r = solver::solve(p, o);
            }
            py::dict d;
            d["solution"] = r.solution;
            d["cost"] = py_int(r.cost);
            d["bound"] = r.bound;
            d["gap"] = r.gap;
            d["seconds"] = r.seconds;
            d["optimal"] = r.optimal;
            d["status"] = r.status;
            d["milp_note"] = r.milp_note;
            py::list phases;
            for (const auto& ph : r.phases) {
              py::dict pd;
              pd["name"] = ph.name;
              pd["seconds"] = ph.seconds;
              pd["runs"] = ph.runs;
              pd["improvements"] = ph.improvements;
              pd["gain"] = ph.gain;
              phases.append(pd);
            }
            d["phases"] = phases;
            return d;
          },
          py::arg("time_limit") = 60.0, py::arg("seed") = 0, py::arg("threads") = 2, py::arg("exact") = false,
          py::arg("progress") = nullptr, py::arg("gap_tolerance") = 1e-3,
          py::arg("search_options") = std::map<std::string, double>{});

  m.def(
      "solve_plain_milp",
      [](const solver::Problem& p, double time_limit, int threads, py::object target) {
        solver::MilpResult r;
        solver::Model model;
        solver::MilpOptions o;
        o.time_limit_s = time_limit;
        o.threads = threads;
        if (!target.is_none()) {  // read while holding the GIL
          o.has_target = true;
          o.target = target.cast<double>();
        }
        {
          py::gil_scoped_release nogil;
          model = solver::plain_model(p);
          r = solver::solve_milp(model, o);
        }
        if (!r.ran) throw std::runtime_error("HiGHS did not run: " + r.why);
        py::dict d;
        d["seconds"] = r.seconds;
        d["optimal"] = r.optimal;
        d["dual_bound"] = r.dual_bound;
        d["improvements"] = r.improvements;
        if (r.labels.empty()) {
          d["solution"] = py::none();
          d["cost"] = py::none();
        } else {
          std::vector<int> x(p.nodes.size());
          for (int i = 0; i < model.n; ++i) x[i] = model.strat[model.off[i] + r.labels[i]];
          solver::Evaluation ev = solver::evaluate(p, x);
          d["solution"] = x;
          d["cost"] = ev.feasible ? py_int(ev.cost) : py::none();
        }
        return d;
      },
      py::arg("problem"), py::arg("time_limit"), py::arg("threads") = 2, py::arg("target") = py::none(),
      "Baseline for benchmarks: plain HiGHS on the straightforward MILP (no reductions, no start); stops "
      "early once a solution costs <= target.");
  m.def(
      "solver_options",
      []() {
        const solver::SearchOptions defaults;
        py::list out;
        for (const auto& o : solver::search_option_table()) {
          py::dict d;
          d["name"] = o.name;
          d["default"] = defaults.*o.field;
          d["min"] = o.lo;
          d["max"] = o.hi;
          d["integer"] = o.integer;
          d["meaning"] = o.meaning;
          out.append(d);
        }
        return out;
      },
      "Every tunable of the solver's schedule: name, default, bounds, whole number or not, meaning.");
  m.def("set_highs_library", &solver::set_highs_library, py::arg("path"),
        "Where HiGHS is: a shared library, or a directory (highspy's) searched for one exporting the C API.");
  m.def(
      "highs_status",
      []() {
        solver::HighsStatus s = solver::highs_status();
        py::dict d;
        d["loaded"] = s.loaded;
        d["path"] = s.path;
        d["version"] = s.version;
        d["why"] = s.why;
        return d;
      },
      "Which HiGHS library the solver loaded (path, version), or why none was.");
  m.attr("HIGHS_UNAVAILABLE") = solver::kHighsUnavailable;
  m.def("read_solution", &solver::read_solution, py::arg("text"));
}

}  // namespace tlm::pybind
