// Indexing along one dim: topk, sort, cumsum, gather, scatter, scatter_add, scatter_reduce, index_add,
// index_select, slice_scatter/select_scatter, and the backward ops of slice/select.
//
// Each works along a single dim `dim`; every other dim is a batch of
// independent problems, sharded alike in every tensor that has the same size
// there. The dim itself stays whole (indices are positions in it).
// Linear cases: cumsum and gather/index_select in their source, scatter and
// scatter_add and index_add in (self, src) jointly, slice/select_backward in the gradient.
#include "core/strategies/indexing_rule.h"
#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

namespace tlm::strategies {

namespace {

// Rows sharding every dim d != `dim` of tensors of output 0's rank whose size
// at d matches output 0. `tensors` selects which inputs take part (others R).
void along_dim_rows(const RuleCtx& c, DimRows& rows, int dim, const std::vector<int>& inputs) {
  const auto& os = c.out(0).shape;
  const int nd = static_cast<int>(os.size());
  const int n_in = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  for (int d = 0; d < nd; ++d) {
    if (d == dim) continue;
    bool ok = true;
    std::fill(row.begin(), row.end(), R());
    for (int k : inputs) {
      if (k < 0) continue;
      const auto& s = c.in(k).shape;
      if (static_cast<int>(s.size()) != nd || s[d] != os[d]) ok = false;
      row[k] = S(d);
    }
    for (int k = 0; k < c.num_outputs(); ++k) {
      if (c.out(k).shape.size() != os.size() || c.out(k).shape[d] != os[d]) ok = false;
      row[n_in + k] = S(d);
    }
    if (ok) rows.add(row);
  }
}

using indexing::make;

}  // namespace

void register_indexing(Registry& r) {
  // topk(self, k, dim=-1, largest, sorted) -> (values, indices)
  add_rule(r, {"aten.topk.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0});
           }));
  // sort(self, dim=-1, descending) / sort.stable(self, *, stable, dim=-1, descending)
  add_rule(r, {"aten.sort.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0});
           }));
  // sort.stable(self, *, stable, dim, descending): dim keyword-only, schema position 2.
  add_rule(r, {"aten.sort.stable"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0});
           }));
  // argsort(self, dim=-1, descending), cumsum/cumprod(self, dim, *, dtype)
  add_rule(r,
           {"aten.argsort.default",
            "aten.cumprod.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0});
           }));
  // cumsum(self, dim=0): along other dims; linear in self for floating types.
  add_rule(r, {"aten.cumsum.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0});
             if (is_floating(c.in(0).dtype) && is_floating(c.out(0).dtype)) add_partial_rows(c, rows, {{{0}}});
           }));
  // gather(self, dim, index): out has index's shape; linear in self.
  add_rule(r, {"aten.gather.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0, 1});
             add_partial_rows(c, rows, {{{0}}});
           }));
  // scatter.src(self, dim, index, src) / scatter_add: linear in (self, src) jointly
  // for scatter_add; scatter.src overwrites, which is linear in (self, src) too.
  add_rule(r,
           {"aten.scatter.src",
            "aten.scatter_add.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0, 1, 2});
             if (c.num_inputs() == 3) add_partial_rows(c, rows, {{{0, 2}}});
           }));
  // scatter_reduce.two(self, dim, index, src, reduce, include_self): each reduction runs
  // along `dim` within one position of the other dims, which shard alike. Linear in (self,
  // src) jointly for "sum" only (a mean divides by counts, prod/amax/amin are not linear).
  add_rule(r, {"aten.scatter_reduce.two"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0, 1, 2});
             if (c.num_inputs() == 3 && c.str_arg("reduce") == "sum" && c.flag("include_self"))
               add_partial_rows(c, rows, {{{0, 2}}});
           }));
  // index_add(self, dim, index, source, alpha): source's slices added at `index` along
  // `dim`; other dims shard alike in self, source and the result. Linear in (self,
  // source) jointly.
  add_rule(r, {"aten.index_add.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0, 2});
             if (c.num_inputs() == 3) add_partial_rows(c, rows, {{{0, 2}}});
           }));
  // scatter.value(self, dim, index, value): a scalar written into a Partial would be counted per rank.
  add_rule(r, {"aten.scatter.value"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0, 1});
           }));
  // index_select(self, dim, index): other dims follow self; the selected dim
  // follows the (1-D) index. It copies elements of self, so every Partial kind passes.
  add_rule(r, {"aten.index_select.default"}, make([](const RuleCtx& c, DimRows& rows) {
             const int dim = wrap_dim(c.int_arg("dim"), c.in(0).ndim());
             along_dim_rows(c, rows, dim, {0});
             if (c.in(1).ndim() == 1) rows.add({R(), S(0), S(dim)});
             add_partial_rows(c, rows, {{{0}}, PartialOutputs::All, kAllReduceOps});
           }));
  // slice_scatter(self, src, dim, start, end, step): src written into a slice of
  // `dim`; other dims shard alike. Every output element copies one element of self
  // or src, so (self, src) Partial together pass every kind (bool has none).
  add_rule(r, {"aten.slice_scatter.default"}, make([](const RuleCtx& c, DimRows& rows) {
             along_dim_rows(c, rows, wrap_dim(c.int_arg("dim"), c.in(0).ndim()), {0, 1});
             if (c.in(0).dtype != DType::Bool) add_partial_rows(c, rows, {{{0, 1}}, PartialOutputs::All, kAllReduceOps});
           }));
  // select_scatter(self, src, dim, index): src (without `dim`) written at one index
  // of `dim`; other dims shard alike (src's dims shift past `dim`). Copies, as slice_scatter.
  add_rule(r, {"aten.select_scatter.default"}, make([](const RuleCtx& c, DimRows& rows) {
             const int64_t nd = c.in(0).ndim();
             const int dim = wrap_dim(c.int_arg("dim"), nd);
             const auto& ss = c.in(0).shape;
             const auto& src = c.in(1).shape;
             for (int d = 0; d < static_cast<int>(nd); ++d) {
               if (d == dim) continue;
               const int k = d < dim ? d : d - 1;
               if (k < static_cast<int>(src.size()) && src[k] == ss[d]) rows.add({S(d), S(k), S(d)});
             }
             if (c.in(0).dtype != DType::Bool) add_partial_rows(c, rows, {{{0, 1}}, PartialOutputs::All, kAllReduceOps});
           }));
  // slice_backward(grad, input_sizes, dim, start, end, step): zeros + grad in a
  // slice of `dim`; other dims shard alike, shapes rewritten per rank.
  {
    Rule sb = make([](const RuleCtx& c, DimRows& rows) {
      const int dim = wrap_dim(c.int_arg("dim"), c.out(0).ndim());
      along_dim_rows(c, rows, dim, {0});
      add_partial_rows(c, rows, {{{0}}});
    });
    sb.call_args = output_shape_arg("input_sizes");
    add_rule(r, {"aten.slice_backward.default"}, sb);
  }
  // select_backward(grad, input_sizes, dim, index): the output gains `dim`.
  {
    Rule sb = make([](const RuleCtx& c, DimRows& rows) {
      const int64_t ond = c.out(0).ndim();
      const int dim = wrap_dim(c.int_arg("dim"), ond);
      const auto& gs = c.in(0).shape;
      const auto& os = c.out(0).shape;
      for (int d = 0; d < static_cast<int>(ond); ++d) {
        if (d == dim) continue;
        const int g = d < dim ? d : d - 1;
        if (gs[g] == os[d]) rows.add({S(g), S(d)});
      }
      add_partial_rows(c, rows, {{{0}}});
    });
    sb.call_args = output_shape_arg("input_sizes");
    add_rule(r, {"aten.select_backward.default"}, sb);
  }
}

}  // namespace tlm::strategies
