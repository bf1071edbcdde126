// embedding and embedding_dense_backward.
//
// Forward: shard the embedding dim of the table (output's last dim), or any
// index dim (table replicated). Sharding the vocabulary would need masked
// lookups that the plain local op does not do, so it is not offered. The
// lookup is linear in the table: a Partial table gives a Partial output.
// Backward: the gradient table accumulates over every index, so sharding an
// index dim (with grad_output alike) gives a Partial(sum) table -- unless
// scale_grad_by_freq, whose per-token counts need every index.
#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

void embedding_rows(const RuleCtx& c, DimRows& rows) {
  if (c.num_inputs() != 2) return;
  const int idx_nd = static_cast<int>(c.in(1).ndim());
  rows.add({S(1), R(), S(idx_nd)});
  for (int d = 0; d < idx_nd; ++d) rows.add({R(), S(d), S(d)});
  add_partial_rows(c, rows, {{{0}}});  // a lookup is linear in the table
}

void embedding_backward_rows(const RuleCtx& c, DimRows& rows) {
  if (c.num_inputs() != 2) return;
  const int idx_nd = static_cast<int>(c.in(1).ndim());
  rows.add({S(idx_nd), R(), S(1)});
  if (!c.flag("scale_grad_by_freq"))
    for (int d = 0; d < idx_nd; ++d) rows.add({S(d), S(d), P()});
  add_partial_rows(c, rows, {{{0}}});  // linear in grad_output
}

}  // namespace

void register_embedding(Registry& r) {
  Rule f;
  f.family = "embedding";
  f.dims = embedding_rows;
  f.work = [](const RuleCtx& c, const OpStrategy& s) {
    OpWork w;
    // Reads one table row per output row, writes the output.
    w.bytes = 2.0 * static_cast<double>(local_numel_out(c, s, 0)) * element_size(c.out(0).dtype) +
              static_cast<double>(local_numel_in(c, s, 1)) * element_size(c.in(1).dtype);
    return w;
  };
  // Lookup: vocabulary-sharded table (Partial out), index-sharded rows, or linear in the table.
  add_rule(r, {"aten.embedding.default"}, f);
  Rule b;
  b.family = "embedding";
  b.dims = embedding_backward_rows;
  b.work = [](const RuleCtx& c, const OpStrategy& s) { return elementwise_work(c, s, 0.0); };
  // Scatter-add of grad rows into the table: the forward's splits transposed.
  add_rule(r, {"aten.embedding_dense_backward.default"}, b);
}

}  // namespace tlm::strategies
