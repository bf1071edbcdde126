// Factory and *_like ops: values do not depend on any input's values.
//
// A fresh constant tensor can be produced directly in any R/S placement: each
// rank builds its local piece (shape arguments rewritten per rank). *_like
// ops follow their input's sharding (they take its local shape); a Partial
// input only contributes its (global) shape, so it yields a replicated result.
// Random factories are deliberately absent: a sharded draw differs from the
// unsharded one, so they take the replicate fallback.
#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

namespace tlm::strategies {

namespace {

void fresh_rows(const RuleCtx& c, DimRows& rows) {
  if (c.num_outputs() != 1) return;
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  for (int d = 0; d < c.out(0).ndim(); ++d) {
    row[c.num_inputs()] = S(d);
    rows.add(row);
  }
  // new_*(self, size): self gives only dtype and device, so a sharded or Partial self
  // needs no gathering. The fresh tensor is then whole on every rank, or keeps self's shard
  // dim where both have it (a batch-sharded value's new buffer stays on its batch shard).
  if (c.num_inputs() == 1) {
    for (int d = 0; d < c.in(0).ndim(); ++d) {
      rows.add({S(d), R()});
      if (d < c.out(0).ndim()) rows.add({S(d), S(d)});
    }
    add_partial_rows(c, rows, {{{0}}, PartialOutputs::None});
  }
}

Rule fresh_rule(const char* size_name) {
  Rule r;
  r.family = "factory";
  r.dims = fresh_rows;
  r.work = [](const RuleCtx& c, const OpStrategy& s) {
    OpWork w;
    w.bytes = io_bytes(c, s);
    return w;
  };
  r.call_args = output_shape_arg(size_name);
  return r;
}

Rule like_rule() {
  Rule r;
  r.family = "factory";
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    if (c.num_inputs() != 1 || c.num_outputs() != 1) return;
    for (int d = 0; d < c.out(0).ndim(); ++d) rows.add({S(d), S(d)});
    // The output's values do not depend on the input's: a Partial input is fine.
    add_partial_rows(c, rows, {{{0}}, PartialOutputs::None});
  };
  r.work = [](const RuleCtx& c, const OpStrategy& s) {
    OpWork w;
    w.bytes = static_cast<double>(local_numel_out(c, s, 0)) * element_size(c.out(0).dtype);
    return w;
  };
  return r;
}

// empty_strided / new_empty_strided(size, stride): with the strides of a dense tensor a
// fresh tensor like the others, each rank's piece dense too (its values are unset, so only
// the layout matters); other strides (a permuted layout) keep the tensor whole.
bool strides_dense(const RuleCtx& c) { return dense_strides(c.int_list("size"), c.int_list("stride")); }

Rule strided_fresh_rule() {
  Rule r = fresh_rule("size");
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    if (strides_dense(c)) fresh_rows(c, rows);
  };
  r.call_args = [](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
    if (!strides_dense(c)) return c.same_args();
    const auto local = local_shape(c.out(0).shape, c.mesh(), s.outputs[0], coord);
    return c.with_args({{"size", local}, {"stride", contiguous_strides(local)}});
  };
  return r;
}

// arange(start, end, step) with integer bounds: rank r holds the values at
// its indices [off, off + len), i.e. arange(start + off*step, start + (off+len)*step, step).
Rule arange_rule() {
  Rule r = fresh_rule("start");
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    // Only arange.start_step has a step.
    const bool ints = c.int_scalar("start") && c.int_scalar("end") && (!c.schema_has("step") || c.int_scalar("step"));
    if (ints && c.num_outputs() == 1 && c.out(0).ndim() == 1) rows.add({S(0)});
  };
  r.call_args = [](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
    if (mesh_dims_sharding(s.outputs.at(0), 0).empty()) {  // whole on this rank: the call as traced
      return c.same_args();
    }
    const int64_t start = *c.int_scalar("start");
    const int64_t step = c.schema_has("step") ? *c.int_scalar("step") : 1;
    const Extent e = local_extent(c.out(0).shape[0], c.mesh(), s.outputs[0], 0, coord);
    return c.with_args({{"start", start + e.offset * step}, {"end", start + (e.offset + e.length) * step}});
  };
  return r;
}

}  // namespace

void register_factory(Registry& r) {
  // Fresh tensors from a size argument: any shard, size rewritten per rank.
  add_rule(r,
           {"aten.empty.memory_format",
            "aten.full.default",
            "aten.ones.default",
            "aten.zeros.default"},
           fresh_rule("size"));
  // Fresh tensors (new_*) from a size argument: any shard, size rewritten per rank.
  add_rule(r,
           {"aten.new_empty.default",
            "aten.new_full.default",
            "aten.new_ones.default",
            "aten.new_zeros.default"},
           fresh_rule("size"));
  // Fresh tensors with explicit strides: sharded when the strides are dense.
  add_rule(r,
           {"aten.empty_strided.default",
            "aten.new_empty_strided.default"},
           strided_fresh_rule());
  // Like-shaped fresh tensors: follow the input's shards; values do not depend on it.
  add_rule(r,
           {"aten.empty_like.default",
            "aten.fill.Scalar",
            "aten.full_like.default",
            "aten.ones_like.default",
            "aten.zeros_like.default"},
           like_rule());
  // Ranges: shard the one dim, start/end rewritten per rank.
  add_rule(r,
           {"aten.arange.start",
            "aten.arange.start_step"}, arange_rule());
  {
    Rule s;
    s.family = "factory";
    s.dims = [](const RuleCtx&, DimRows&) {};
    s.work = no_work;
    // Scalars, ranges whose bounds have no start, and identity matrices (a rank's rows of
    // eye(n, m) are not an eye of their own size: the diagonal moves with the offset):
    // replicated (no rows). Consumers that shard them slice their piece for free.
    add_rule(r,
             {"aten.arange.default",
              "aten.eye.default",
              "aten.eye.m",
              "aten.scalar_tensor.default"}, s);
  }
}

}  // namespace tlm::strategies
