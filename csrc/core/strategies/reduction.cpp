// Reductions over some dims (sum, mean, amax/amin, max/min, argmax/argmin,
// var/std, prod, any/all, logsumexp, vector norms).
//
// On one mesh dim a kept dim may be sharded (the output keeps that shard).
// Sharding a reduced dim leaves each rank a partial result whose combination
// is the op's own reduction: sum -> P(sum); mean -> P(avg), exact only when
// every rank holds the same number of elements (checked on the combined
// strategy); amax/amin -> P(max)/P(min), which needs no empty shard (an empty
// max has no value). Partial inputs pass through linear reductions (sum, mean:
// sum/avg kinds) and through amax of P(max) / amin of P(min).
#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

namespace tlm::strategies {

namespace {

enum class Kind { Sum, Mean, Max, Min, None };

struct Reduced {
  std::vector<bool> reduced;  // per input dim
  bool keepdim = false;
};

// Which dims an overload reduces: every one (sum.default), or those of its `dim`
// argument (then it has a `keepdim` too).
enum class Over { AllDims, DimArg };

Reduced parse(const RuleCtx& c, Over over) {
  const int64_t nd = c.in(0).ndim();
  Reduced r;
  r.reduced.assign(static_cast<size_t>(nd), over == Over::AllDims);
  if (over == Over::DimArg) {
    std::vector<int64_t> dims = c.int_list("dim");
    if (dims.empty()) {
      r.reduced.assign(static_cast<size_t>(nd), true);  // dim=None / [] reduces everything
    } else {
      for (auto d : dims)
        if (nd > 0) r.reduced[wrap_dim(d, nd)] = true;
    }
  }
  r.keepdim = over == Over::DimArg && c.flag("keepdim");
  return r;
}

void reduction_rows(const RuleCtx& c, DimRows& rows, Kind kind, const Reduced& red) {
  const int nd = static_cast<int>(red.reduced.size());
  const int n_out = c.num_outputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  int out_d = 0;
  for (int i = 0; i < nd; ++i) {
    row[0] = S(i);
    if (!red.reduced[i]) {
      for (int k = 0; k < n_out; ++k) row[1 + k] = S(out_d);
      rows.add(row);
      ++out_d;
      continue;
    }
    if (red.keepdim) ++out_d;
    Placement p;
    switch (kind) {
      case Kind::Sum: p = P(ReduceOp::Sum); break;
      case Kind::Mean: p = P(ReduceOp::Avg); break;
      case Kind::Max: p = P(ReduceOp::Max); break;
      case Kind::Min: p = P(ReduceOp::Min); break;
      case Kind::None: continue;
    }
    for (int k = 0; k < n_out; ++k) row[1 + k] = p;
    rows.add(row);
  }
  auto through = [&](ReduceOp op) {
    if (c.in(0).dtype == DType::Bool) return;  // a bool tensor has no pending sum, max or min
    row[0] = P(op);
    for (int k = 0; k < n_out; ++k) row[1 + k] = P(op);
    rows.add(row);
  };
  switch (kind) {
    case Kind::Sum:
    case Kind::Mean: through(ReduceOp::Sum); through(ReduceOp::Avg); break;
    case Kind::Max: through(ReduceOp::Max); break;
    case Kind::Min: through(ReduceOp::Min); break;
    case Kind::None: break;
  }
}

Rule reduction_rule(Kind kind, Over over) {
  Rule r;
  r.family = "reduction";
  r.dims = [=](const RuleCtx& c, DimRows& rows) { reduction_rows(c, rows, kind, parse(c, over)); };
  if (kind == Kind::Mean || kind == Kind::Max || kind == Kind::Min) {
    r.valid = [=](const RuleCtx& c, const OpStrategy& s) {
      const Reduced red = parse(c, over);
      const auto& shape = c.in(0).shape;
      for (size_t d = 0; d < red.reduced.size(); ++d) {
        if (!red.reduced[d]) continue;
        const int dd = static_cast<int>(d);
        if (kind == Kind::Mean && !evenly_sharded(shape[d], c.mesh(), s.inputs[0], dd)) return false;
        if (kind != Kind::Mean && !no_empty_shard(shape[d], c.mesh(), s.inputs[0], dd)) return false;
      }
      return true;
    };
  }
  r.work = [](const RuleCtx& c, const OpStrategy& s) {
    OpWork w;
    w.flops = static_cast<double>(local_numel_in(c, s, 0));
    w.bytes = io_bytes(c, s);
    return w;
  };
  return r;
}

}  // namespace

void register_reduction(Registry& r) {
  // Full and per-dim sums: Partial(sum) out of a sharded reduced dim.
  add_rule(r, {"aten.sum.default"}, reduction_rule(Kind::Sum, Over::AllDims));
  // sum(self, dim, keepdim, dtype).
  add_rule(r, {"aten.sum.dim_IntList"}, reduction_rule(Kind::Sum, Over::DimArg));
  // Means: Partial(avg) out of a sharded reduced dim (even shards).
  add_rule(r, {"aten.mean.default"}, reduction_rule(Kind::Mean, Over::AllDims));
  // mean(self, dim, keepdim, dtype).
  add_rule(r, {"aten.mean.dim"}, reduction_rule(Kind::Mean, Over::DimArg));
  // amax(self, dim, keepdim): Partial(max).
  add_rule(r, {"aten.amax.default"}, reduction_rule(Kind::Max, Over::DimArg));
  // amin(self, dim, keepdim): Partial(min).
  add_rule(r, {"aten.amin.default"}, reduction_rule(Kind::Min, Over::DimArg));
  // Full max: Partial(max).
  add_rule(r, {"aten.max.default"}, reduction_rule(Kind::Max, Over::AllDims));
  // Full min: Partial(min).
  add_rule(r, {"aten.min.default"}, reduction_rule(Kind::Min, Over::AllDims));
  // Index-producing and non-decomposable reductions: kept dims only.
  add_rule(r,
           {"aten.all.dim",
            "aten.any.dim",
            "aten.argmax.default",
            "aten.argmin.default",
            "aten.logsumexp.default",
            "aten.max.dim",
            "aten.min.dim",
            "aten.prod.dim_int"},
           reduction_rule(Kind::None, Over::DimArg));
  // std/var(self, dim, unbiased, keepdim).
  add_rule(r,
           {"aten.std.dim",
            "aten.var.dim"}, reduction_rule(Kind::None, Over::DimArg));
  // Full reductions of the same kind: no Partial for them (prod, boolean), kept dims only.
  add_rule(r,
           {"aten.all.default",
            "aten.any.default",
            "aten.prod.default"}, reduction_rule(Kind::None, Over::AllDims));
  // Variance and std (self, dim, *, correction, keepdim): not a combination of local values.
  add_rule(r,
           {"aten.std.correction",
            "aten.std_mean.correction",
            "aten.var.correction",
            "aten.var_mean.correction"},
           reduction_rule(Kind::None, Over::DimArg));
  // Vector norms (self, ord, dim, keepdim, dtype): not a combination of local norms for
  // every ord, kept dims only.
  add_rule(r, {"aten.linalg_vector_norm.default"}, reduction_rule(Kind::None, Over::DimArg));
  // Boolean reductions over a list of dims.
  add_rule(r,
           {"aten.all.dims",
            "aten.any.dims"}, reduction_rule(Kind::None, Over::DimArg));
}

}  // namespace tlm::strategies
