// Random ops. On a shard a random op cannot draw only its piece: its numbers would
// differ from one process's. The runtime (torch_localmap/_runtime/random_ops.py)
// therefore draws the whole tensor on every rank (the ranks' generators agree)
// and keeps the rank's piece, so masks equal the single-device ones under the
// same seed. For the planner these ops are elementwise: any dim may be sharded.
//
// native_dropout(input, p, train) -> (output, mask): output = input * mask / (1-p)
// is linear in input, so a Partial input gives a Partial output; the mask is the
// same whole value on every rank of that mesh dim (replicated).
//
// bernoulli.p(self, p), rand_like / randn_like(self), exponential(self, lambd) and
// uniform(self, from, to) (the functional forms of exponential_ and uniform_: PhiMoE's
// router jitter): a draw of self's shape whose values do not depend on self's, so it
// shards like self; it is not linear in self (no Partial). rand / randn(size): a draw
// of that size, any dim sharded (the call keeps the global size: the runtime draws it
// whole).
#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

void dropout_rows(const RuleCtx& c, DimRows& rows) {
  if (c.num_inputs() != 1 || c.num_outputs() != 2) return;
  for (int d = 0; d < static_cast<int>(c.in(0).ndim()); ++d) rows.add_uniform(S(d));
  add_partial_rows(c, rows, {{{0}}, PartialOutputs::First});
}

void same_shape_draw_rows(const RuleCtx& c, DimRows& rows) {
  if (c.num_inputs() != 1 || c.num_outputs() != 1) return;
  for (int d = 0; d < static_cast<int>(c.in(0).ndim()); ++d) rows.add_uniform(S(d));
}

void sized_draw_rows(const RuleCtx& c, DimRows& rows) {
  if (c.num_inputs() != 0 || c.num_outputs() != 1) return;
  for (int d = 0; d < static_cast<int>(c.out(0).ndim()); ++d) rows.add({S(d)});
}

}  // namespace

void register_random(Registry& r) {
  Rule dropout;
  dropout.family = "random";
  dropout.dims = dropout_rows;
  dropout.work = [](const RuleCtx& c, const OpStrategy& s) { return elementwise_work(c, s, 2.0); };
  // Dropout draws the global mask and keeps its piece (the runtime); elementwise otherwise.
  add_rule(r, {"aten.native_dropout.default"}, dropout);
  Rule draw;
  draw.family = "random";
  draw.dims = same_shape_draw_rows;
  // Draws of self's shape (values independent of self's): the global draw's piece, any dim sharded.
  add_rule(r,
           {"aten.bernoulli.p",
            "aten.exponential.default",
            "aten.rand_like.default",
            "aten.randn_like.default",
            "aten.uniform.default"},
           draw);
  Rule sized = draw;
  sized.dims = sized_draw_rows;
  // Draws of a given size (stochastic depth's per-sample keep masks in Hugging Face models).
  add_rule(r, {"aten.rand.default", "aten.randn.default"}, sized);
}

}  // namespace tlm::strategies
