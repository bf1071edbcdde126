// softmax / log_softmax and their backward ops.
//
// The normalized dim must be whole on every rank; any other dim can be
// sharded. The backward ops are linear in the incoming gradient (the output
// is fixed), so a Partial gradient with a replicated output stays Partial.
#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

void softmax_rows(const RuleCtx& c, DimRows& rows, bool backward) {
  const int64_t nd = c.out(0).ndim();
  const int dim = wrap_dim(c.int_arg("dim"), nd);
  for (int d = 0; d < nd; ++d) {
    if (d == dim) continue;
    rows.add_uniform(S(d));
  }
  if (backward && c.num_inputs() == 2) add_partial_rows(c, rows, {{{0}}});  // linear in grad_output
}

Rule softmax_rule(bool backward) {
  Rule r;
  r.family = "softmax";
  r.dims = [backward](const RuleCtx& c, DimRows& rows) { softmax_rows(c, rows, backward); };
  r.work = [](const RuleCtx& c, const OpStrategy& s) { return elementwise_work(c, s, 5.0); };
  return r;
}

}  // namespace

void register_softmax(Registry& r) {
  // (Log-)softmax over `dim`: every other dim shards.
  add_rule(r,
           {"aten._log_softmax.default",
            "aten._safe_softmax.default",
            "aten._softmax.default"}, softmax_rule(false));
  // Their gradients: every dim but `dim`; linear in grad_output.
  add_rule(r,
           {"aten._log_softmax_backward_data.default",
            "aten._softmax_backward_data.default"}, softmax_rule(true));
}

}  // namespace tlm::strategies
