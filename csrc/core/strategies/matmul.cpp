// Contractions (mm, bmm, addmm, baddbmm, mv, dot) as einsum-style label sets.
//
// On one mesh dim: shard any output label (its dim in every operand that has
// it, others replicated), or shard a contracted label in both operands and
// produce a Partial(sum); a single Partial operand (sum or avg) with the
// other replicated stays Partial because the contraction is linear in each
// operand. The optional bias (addmm/baddbmm) broadcasts like an elementwise
// operand and must be Partial whenever the product is.
#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

#include <algorithm>

namespace tlm::strategies {

namespace {

struct Contraction {
  int a = 0, b = 1, bias = -1;  // tensor-input indices
  std::string la, lb, lo;       // labels per dim of A, B, out
};

int pos_of(const std::string& labels, char l) {
  auto p = labels.find(l);
  return p == std::string::npos ? -1 : static_cast<int>(p);
}

// Placement of a broadcast bias for an output dim `d` sharded (or R when the
// bias broadcasts along it).
Placement bias_for_out_dim(const RuleCtx& c, int bias, int d) {
  const auto& bs = c.in(bias).shape;
  const auto& os = c.out(0).shape;
  const int i = d - (static_cast<int>(os.size()) - static_cast<int>(bs.size()));
  return (i >= 0 && bs[i] == os[d]) ? S(i) : R();
}

void contraction_rows(const RuleCtx& c, DimRows& rows, const Contraction& k) {
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  const int out = c.num_inputs();
  auto reset = [&] { std::fill(row.begin(), row.end(), R()); };
  for (size_t d = 0; d < k.lo.size(); ++d) {  // output labels
    reset();
    const char l = k.lo[d];
    int pa = pos_of(k.la, l), pb = pos_of(k.lb, l);
    if (pa >= 0) row[k.a] = S(pa);
    if (pb >= 0) row[k.b] = S(pb);
    if (k.bias >= 0) row[k.bias] = bias_for_out_dim(c, k.bias, static_cast<int>(d));
    row[out] = S(static_cast<int>(d));
    rows.add(row);
  }
  for (size_t i = 0; i < k.la.size(); ++i) {  // contracted labels
    const char l = k.la[i];
    if (pos_of(k.lo, l) >= 0) continue;
    int pb = pos_of(k.lb, l);
    if (pb < 0) continue;
    reset();
    row[k.a] = S(static_cast<int>(i));
    row[k.b] = S(pb);
    if (k.bias >= 0) row[k.bias] = P();
    row[out] = P();
    rows.add(row);
  }
  // Linear in each operand with the other replicated; the bias is Partial with the product.
  add_partial_rows(c, rows, {{{k.a, k.bias}, {k.b, k.bias}}});
}

// The operands' ranks must match the labels (the rows index them by label).
Contraction checked(const RuleCtx& c, const Contraction& k) {
  const int want_inputs = k.bias >= 0 ? 3 : 2;
  if (c.num_inputs() != want_inputs || c.num_outputs() != 1)
    c.fail("expected " + std::to_string(want_inputs) + " tensor inputs and 1 output, got " +
           std::to_string(c.num_inputs()) + " and " + std::to_string(c.num_outputs()));
  if (c.in(k.a).ndim() != static_cast<int64_t>(k.la.size()) || c.in(k.b).ndim() != static_cast<int64_t>(k.lb.size()) ||
      c.out(0).ndim() != static_cast<int64_t>(k.lo.size()))
    c.fail("operand ranks " + std::to_string(c.in(k.a).ndim()) + ", " + std::to_string(c.in(k.b).ndim()) + " -> " +
           std::to_string(c.out(0).ndim()) + " do not fit " + k.la + "," + k.lb + "->" + k.lo);
  return k;
}

Rule contraction_rule(std::function<Contraction(const RuleCtx&)> layout, bool has_bias) {
  Rule r;
  r.family = "matmul";
  r.dims = [layout](const RuleCtx& c, DimRows& rows) { contraction_rows(c, rows, checked(c, layout(c))); };
  r.work = [layout, has_bias](const RuleCtx& c, const OpStrategy& s) {
    const Contraction k = checked(c, layout(c));
    auto sa = local_shape_in(c, s, k.a);
    auto sb = local_shape_in(c, s, k.b);
    // Batch, M, K (A's labels: in all three, in A and out, in A and B) and N (B's own) of the
    // local product; integers, so their product is exact in any order.
    double batch = 1, m = 1, n = 1, kk = 1;
    for (size_t i = 0; i < k.la.size(); ++i) {
      const bool in_b = pos_of(k.lb, k.la[i]) >= 0, in_out = pos_of(k.lo, k.la[i]) >= 0;
      double& dim = !in_b ? m : in_out ? batch : kk;
      dim *= static_cast<double>(sa[i]);
    }
    for (size_t i = 0; i < k.lb.size(); ++i)
      if (pos_of(k.la, k.lb[i]) < 0) n *= static_cast<double>(sb[i]);
    OpWork w;
    w.flops = 2.0 * batch * m * kk * n;
    if (has_bias) w.flops += 2.0 * static_cast<double>(local_numel_out(c, s, 0));
    w.bytes = io_bytes(c, s);
    w.min_dim = std::min({m, n, kk});
    return w;
  };
  return r;
}

// Grouped contractions (MoE experts): out[m, n] = sum_k in[m, k] * w[g(m), k, n],
// the rows m grouped by the cumulative ends in `offs` (values known only at run
// time, so rows are never split). Shardable: k (Partial out), n, and for the
// batched 3-D x 3-D form the group dim; linear in each operand.
void grouped_rows(const RuleCtx& c, DimRows& rows) {
  const int64_t a = c.in(0).ndim(), b = c.in(1).ndim();
  const int out = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  auto add = [&](std::initializer_list<std::pair<int, Placement>> set) {
    std::fill(row.begin(), row.end(), R());
    for (const auto& [t, p] : set) row[t] = p;
    rows.add(row);
  };
  if (a == 2 && b == 3) {  // (M, K) x (G, K, N) -> (M, N)
    add({{0, S(1)}, {1, S(1)}, {out, P()}});
    add({{1, S(2)}, {out, S(1)}});
  } else if (a == 3 && b == 3) {  // (G, M, K) x (G, K, N) -> (G, M, N)
    add({{0, S(0)}, {1, S(0)}, {out, S(0)}});
    add({{0, S(2)}, {1, S(1)}, {out, P()}});
    add({{1, S(2)}, {out, S(2)}});
    add({{0, S(1)}, {out, S(1)}});
  } else if (a == 2 && b == 2 && c.out(0).ndim() == 3) {  // (K, M) x (M, N) -> (G, K, N), groups over M
    add({{0, S(0)}, {out, S(1)}});
    add({{1, S(1)}, {out, S(2)}});
  } else if (a == 3 && b == 2) {  // (G, M, K) x (K, N) -> (M, N)? unsupported layout: replicated only
  }
  add_partial_rows(c, rows, {{{0}, {1}}});
}

// transformers::grouped_mm_fallback_backward(input (M,K), weight (G,K,N), offs, grad_out (M,N))
//   -> (grad_input (M,K), grad_weight (G,K,N)).
void grouped_backward_rows(const RuleCtx& c, DimRows& rows) {
  if (c.num_inputs() != 4 || c.num_outputs() != 2 || c.in(0).ndim() != 2 || c.in(1).ndim() != 3) return;
  rows.add({S(1), S(1), R(), R(), S(1), S(1)});  // k: each rank its slice of both gradients
  rows.add({R(), S(2), R(), S(1), P(), S(2)});   // n: grad_input sums over n
  add_partial_rows(c, rows, {{{3}}});            // linear in grad_out
}

// torch._grouped_mm's kernels (CPU and CUDA) want every row stride a multiple of 16
// bytes: each rank's piece of a sharded trailing dim must keep that, or the local
// call fails.
bool keeps_16_byte_rows(const RuleCtx& c, const OpStrategy& s) {
  for (int k = 0; k < 2 && k < c.num_inputs(); ++k) {
    const TensorMeta& t = c.in(k);
    if (t.ndim() == 0) continue;
    const int64_t per = 16 / std::max<int64_t>(1, element_size(t.dtype));
    const int last = static_cast<int>(t.ndim()) - 1;
    for (const auto& e : all_extents(t.shape[last], c.mesh(), s.inputs[k], last))
      if (e.length % per != 0) return false;
  }
  return true;
}

Rule grouped_rule(bool backward, bool aligned_rows) {
  Rule r;
  r.family = "matmul";
  r.dims = backward ? grouped_backward_rows : grouped_rows;
  if (aligned_rows) r.valid = keeps_16_byte_rows;
  r.work = [](const RuleCtx& c, const OpStrategy& s) {
    // Every row meets one group's matrix: 2 * M * K * N per product (twice in backward).
    auto in = local_shape_in(c, s, 0);
    auto w = local_shape_in(c, s, 1);
    double m = 1, k = 1, n = 1;
    if (in.size() == 2 && w.size() == 3) m = static_cast<double>(in[0]), k = static_cast<double>(in[1]),
                                         n = static_cast<double>(w[2]);
    else if (in.size() == 3 && w.size() == 3) m = static_cast<double>(in[0] * in[1]), k = static_cast<double>(in[2]),
                                              n = static_cast<double>(w[2]);
    else if (in.size() == 2 && w.size() == 2) m = static_cast<double>(in[1]), k = static_cast<double>(in[0]),
                                              n = static_cast<double>(w[1]);
    OpWork out;
    out.flops = 2.0 * m * k * n * (c.num_outputs() == 2 ? 2.0 : 1.0);
    out.bytes = io_bytes(c, s);
    // The rows split between the groups at run time: on average m / groups each.
    const double groups = w.size() == 3 ? std::max<double>(1, static_cast<double>(w[0])) : 1;
    out.min_dim = std::min({std::max(1.0, m / groups), k, n});
    return out;
  };
  return r;
}

}  // namespace

void register_matmul(Registry& r) {
  // mm(A, B): out = A @ B.
  add_rule(r, {"aten.mm.default"}, contraction_rule([](const RuleCtx&) { return Contraction{0, 1, -1, "mk", "kn", "mn"}; }, false));
  // bmm(A, B): batched mm.
  add_rule(r, {"aten.bmm.default"},
           contraction_rule([](const RuleCtx&) { return Contraction{0, 1, -1, "bmk", "bkn", "bmn"}; }, false));
  // mv(A, x): matrix-vector.
  add_rule(r, {"aten.mv.default"}, contraction_rule([](const RuleCtx&) { return Contraction{0, 1, -1, "mk", "k", "m"}; }, false));
  // dot(a, b): scalar out.
  add_rule(r, {"aten.dot.default"}, contraction_rule([](const RuleCtx&) { return Contraction{0, 1, -1, "k", "k", ""}; }, false));
  // addmm(bias, A, B): tensor inputs are bias, A, B.
  add_rule(r, {"aten.addmm.default"},
           contraction_rule([](const RuleCtx&) { return Contraction{1, 2, 0, "mk", "kn", "mn"}; }, true));
  // Grouped matmuls of MoE experts (torch._grouped_mm, and transformers' fallback of it).
  add_rule(r, {"aten._grouped_mm.default"}, grouped_rule(false, /*aligned_rows=*/true));
  add_rule(r, {"transformers.grouped_mm_fallback.default"}, grouped_rule(false, false));
  // transformers' backward of its fallback: both gradients at once.
  add_rule(r, {"transformers.grouped_mm_fallback_backward.default"}, grouped_rule(true, false));
  // baddbmm(bias, A, B): batched addmm.
  add_rule(r, {"aten.baddbmm.default"},
           contraction_rule([](const RuleCtx&) { return Contraction{1, 2, 0, "bmk", "bkn", "bmn"}; }, true));
}

}  // namespace tlm::strategies
