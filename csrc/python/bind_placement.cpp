// Placement algebra for Python: the kind table, spec parsing, local layouts and
// redistribution plans. Specs cross as strings ("S(0)RP(sum)"), meshes as shape
// lists. torch_localmap/placements.py is the one Python caller of the kind table
// and of spec_parts: everything else converts through it.
#include <pybind11/stl.h>

#include <optional>

#include "python/bindings.h"
#include "core/layout.h"
#include "core/mesh.h"
#include "core/placement.h"
#include "core/placement_kinds.h"
#include "core/rank_steps.h"
#include "core/redistribute.h"
#include "core/tensor_meta.h"

namespace py = pybind11;

namespace tlm::pybind {
namespace {

py::tuple as_tuple(const std::vector<int64_t>& v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) t[i] = v[i];
  return t;
}

py::object reduce_or_none(const CollectiveStep& s) {
  switch (s.kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::LocalPartition: return py::str(to_string(s.reduce));
    default: return py::none();
  }
}

py::object dim_or_none(int d) { return d < 0 ? py::object(py::none()) : py::object(py::int_(d)); }

}  // namespace

void bind_placement(py::module_& m) {
  m.def(
      "placement_kinds",
      [] {
        py::list out;
        for (const KindInfo& k : all_kinds()) {
          py::dict d;
          d["name"] = k.name;
          d["letter"] = std::string(1, k.letter);
          d["takes_dim"] = k.takes_dim;
          d["takes_reduce_op"] = k.takes_reduce_op;
          d["splits_dim"] = k.splits_dim;
          d["pending"] = k.pending;
          d["gradient"] = kind_info(k.gradient).name;
          out.append(std::move(d));
        }
        return out;
      },
      "The placement-kind table (csrc/core/placement_kinds.cpp), one dict per kind in kind order: name (torch's "
      "class name), letter, takes_dim, takes_reduce_op, splits_dim, pending, gradient (the name of its "
      "gradient's kind).");
  m.def(
      "reduce_ops",
      [] {
        py::list out;
        for (ReduceOp op : kReduceOps) out.append(to_string(op));
        return py::tuple(out);
      },
      "The Partial reduce ops the core models, in order: ('sum', 'avg', 'max', 'min').");
  m.def(
      "spec_parts",
      [](const std::string& spec) {
        py::list out;
        for (const Placement& p : parse_spec(spec)) {
          const KindInfo& k = kind_info(p.kind);
          py::object arg = k.takes_dim         ? py::object(py::int_(p.dim))
                           : k.takes_reduce_op ? py::object(py::str(to_string(p.reduce)))
                                               : py::object(py::none());
          out.append(py::make_tuple(k.name, arg));
        }
        return out;
      },
      py::arg("spec"),
      "Parses a spec string into [(kind name, dim or reduce op or None)] per mesh dim: ('Shard', 1), "
      "('Replicate', None), ('Partial', 'sum').");
  m.def(
      "local_layout",
      [](const std::vector<int64_t>& global_shape, std::vector<int64_t> mesh_shape, const std::string& spec,
         const std::vector<int64_t>& coord) {
        check_shape(global_shape, "global_shape");
        LocalLayout l = local_layout(global_shape, make_mesh(std::move(mesh_shape)), parse_spec(spec), coord);
        return py::make_tuple(as_tuple(l.shape), as_tuple(l.offset));
      },
      py::arg("global_shape"), py::arg("mesh_shape"), py::arg("spec"), py::arg("coord"),
      "(local_shape, global_offset) of the shard at mesh coordinate `coord`, as DTensor computes them.");
  m.def(
      "local_layouts",
      [](const std::vector<int64_t>& global_shape, std::vector<int64_t> mesh_shape, const std::string& spec) {
        check_shape(global_shape, "global_shape");
        auto all = all_local_layouts(global_shape, make_mesh(std::move(mesh_shape)), parse_spec(spec));
        py::list out;
        for (const auto& l : all) out.append(py::make_tuple(as_tuple(l.shape), as_tuple(l.offset)));
        return out;
      },
      py::arg("global_shape"), py::arg("mesh_shape"), py::arg("spec"),
      "[(local_shape, global_offset)] for every rank of the mesh, indexed by rank (row-major).");
  m.def(
      "max_local_shape",
      [](const std::vector<int64_t>& global_shape, std::vector<int64_t> mesh_shape, const std::string& spec) {
        check_shape(global_shape, "global_shape");
        return as_tuple(max_local_shape(global_shape, make_mesh(std::move(mesh_shape)), parse_spec(spec)));
      },
      py::arg("global_shape"), py::arg("mesh_shape"), py::arg("spec"));
  m.def(
      "plan_redistribute",
      [](const std::vector<int64_t>& global_shape, std::vector<int64_t> mesh_shape, const std::string& src,
         const std::string& dst, std::optional<std::vector<int64_t>> coord) {
        check_shape(global_shape, "global_shape");
        Mesh mesh = make_mesh(std::move(mesh_shape));
        const PlacementSpec from = parse_spec(src), to = parse_spec(dst);
        auto describe = [](const CollectiveStep& s) {
          py::dict d;
          d["kind"] = to_string(s.kind);
          d["mesh_dim"] = s.mesh_dim;
          d["src_dim"] = dim_or_none(s.src_dim);
          d["dst_dim"] = dim_or_none(s.dst_dim);
          d["reduce"] = reduce_or_none(s);
          d["shape"] = as_tuple(s.shape);
          d["before"] = to_string(s.before);
          d["after"] = to_string(s.after);
          return d;
        };
        py::list out;
        if (!coord) {
          for (const auto& s : plan_redistribute(global_shape, mesh, from, to).steps) out.append(describe(s));
          return out;
        }
        // What one rank needs to run a step (the runtime does no shape arithmetic).
        for (const RankStep& r : rank_redistribute_steps(global_shape, mesh, from, to, *coord)) {
          py::dict d = describe(r.step);
          d["logical_shape"] = as_tuple(r.logical_shape);
          if (r.step.src_dim >= 0) d["src_full"] = r.src_full;
          if (r.step.dst_dim >= 0) {
            d["dst_full"] = r.dst_full;
            d["dst_chunk"] = py::make_tuple(r.chunk_start, r.chunk_size);
          }
          out.append(std::move(d));
        }
        return out;
      },
      py::arg("global_shape"), py::arg("mesh_shape"), py::arg("src"), py::arg("dst"), py::arg("coord") = py::none(),
      "DTensor's redistribution steps from spec `src` to `dst`, in execution order, as dicts with keys kind "
      "(all_gather | reduce_scatter | all_reduce | all_to_all | local_chunk | local_partition), mesh_dim, "
      "src_dim, dst_dim, reduce (None or sum|avg|max|min), shape (global), before, after (spec strings) and, "
      "when `coord` is given, the per-rank fields logical_shape (the shape the step's collective sees at that "
      "coordinate), src_full / dst_full (ceil(logical size / group size) of the source / target shard dim: the "
      "padded chunk size of uneven splits) and dst_chunk ((start, size) of this rank's piece of the target dim). "
      "Raises ValueError for transitions DTensor refuses.");
  m.def(
      "can_redistribute",
      [](const std::string& src, const std::string& dst, std::optional<std::vector<int64_t>> mesh_shape) {
        if (mesh_shape) return can_redistribute(make_mesh(std::move(*mesh_shape)), parse_spec(src), parse_spec(dst));
        return can_redistribute(parse_spec(src), parse_spec(dst));
      },
      py::arg("src"), py::arg("dst"), py::arg("mesh_shape") = py::none());
}

}  // namespace tlm::pybind
