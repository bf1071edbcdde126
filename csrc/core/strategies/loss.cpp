// nll_loss / nll_loss2d forward and backward.
//
// reduction: 0 none, 1 mean, 2 sum. Sharding the batch (and, for the 2d
// variant, spatial) dims of input and target alike is exact for 'none'
// (the output is sharded alike) and 'sum' (output and total_weight are
// Partial(sum)); 'mean' divides by the global total weight, which depends on
// the target values (ignore_index), so its forward is not sharded. Its
// backward is: it receives that total weight as an input, replicated.
// Sharding the class dim would need masked gathers and is not offered.
// Both directions are linear in the scores / incoming gradient.
#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

// Dims of `input` that correspond to target dims: (N) -> 0; (N, H, W) -> 0, 2, 3.
std::vector<std::pair<int, int>> batch_dims(const RuleCtx& c, int input, int target) {
  std::vector<std::pair<int, int>> out;  // (input dim, target dim)
  const int64_t ind = c.in(input).ndim(), tnd = c.in(target).ndim();
  if (ind < 2) return out;  // unbatched (C): nothing to shard
  for (int t = 0; t < tnd; ++t) out.emplace_back(t == 0 ? 0 : t + 1, t);
  return out;
}

void forward_rows(const RuleCtx& c, DimRows& rows) {
  // (self, target, weight?, reduction, ignore_index) -> (output, total_weight)
  const int64_t reduction = c.int_arg("reduction");
  const int w = c.tensor("weight");
  const int n_in = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  if (reduction != 1) {
    for (auto [di, dt] : batch_dims(c, 0, 1)) {
      std::fill(row.begin(), row.end(), R());
      row[0] = S(di);
      row[1] = S(dt);
      if (reduction == 0) {
        row[n_in] = S(dt);
        row[n_in + 1] = R();  // total_weight is not reduced per element
      } else {
        row[n_in] = P();
        row[n_in + 1] = P();
      }
      if (reduction == 0 && c.out(1).ndim() != 0) continue;
      rows.add(row);
    }
  }
  // Linear in the log-probabilities: the loss (not total_weight) is Partial.
  add_partial_rows(c, rows, {{{0}}, PartialOutputs::First});
  (void)w;
}

void backward_rows(const RuleCtx& c, DimRows& rows) {
  // (grad_output, self, target, weight?, reduction, ignore_index, total_weight) -> grad_input
  const int64_t reduction = c.int_arg("reduction");
  const int tw = c.tensor("total_weight");
  const int n_in = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  for (auto [di, dt] : batch_dims(c, 1, 2)) {
    std::fill(row.begin(), row.end(), R());
    row[0] = reduction == 0 ? S(dt) : R();
    row[1] = S(di);
    row[2] = S(dt);
    if (tw >= 0) row[tw] = R();
    row[n_in] = S(di);
    rows.add(row);
  }
  add_partial_rows(c, rows, {{{0}}});  // linear in grad_output
}

}  // namespace

void register_loss(Registry& r) {
  Rule f;
  f.family = "loss";
  f.dims = forward_rows;
  // NLL loss: batch-sharded (Partial loss) or linear in the log-probabilities.
  add_rule(r,
           {"aten.nll_loss2d_forward.default",
            "aten.nll_loss_forward.default"}, f);
  Rule b;
  b.family = "loss";
  b.dims = backward_rows;
  // Its gradient: batch-sharded or linear in grad_output.
  add_rule(r,
           {"aten.nll_loss2d_backward.default",
            "aten.nll_loss_backward.default"}, b);
}

}  // namespace tlm::strategies
