// Elementwise ops with broadcasting.
//
// On one mesh dim, an output dim d can be sharded when every input either
// holds the same dim with the same size (sharded alike) or broadcasts it
// (size 1 or missing: replicated). Partial inputs pass through only where the
// op is linear in them:
//   - Additive: add/sub/rsub of two partials of the same kind (sum or avg);
//   - Multiplicative: mul with exactly one partial operand, div with a
//     partial numerator, *_backward ops that are linear in the incoming grad;
//   - Copy-like ops (clone, detach, float->float casts): every Partial kind,
//     because they commute with any elementwise reduction.
// Scalar-offset ops (add.Scalar, masked_fill, ...) are not linear in a
// partial (the offset would be counted once per rank) and get R/S only.
//
// Partial(max)/Partial(min) pass through ops that are monotone in one tensor
// input with every other input replicated: for f non-decreasing in x,
// max_i f(x_i, y) = f(max_i x_i, y), so P(max) -> P(max) and P(min) -> P(min);
// a non-increasing f swaps the kinds (neg: P(max) -> P(min)). Float rounding is
// monotone, so this is exact. Only functions defined on all reals qualify: the
// other ranks' pieces of a P(max) value are lower than the value and could
// leave the domain of log/sqrt/asin.
#include <functional>
#include <set>

#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

enum class Linear {
  None,      // R/S only
  Additive,  // all tensor inputs partial together (sum, avg)
  Operand,   // listed operands may each be the single partial input (sum, avg)
  Copy,      // single input, any Partial kind
};

// Direction of the output in tensor input k, the others fixed: +1 non-decreasing,
// -1 non-increasing, 0 neither (or not known for these arguments).
using MonotoneFn = std::function<int(const RuleCtx&, int k)>;

struct PointwiseSpec {
  Linear linear = Linear::None;
  std::vector<int> operands;  // Linear::Operand: tensor-input indices that may carry the partial
  MonotoneFn monotone;        // optional: P(max)/P(min) rows, see the header comment
};

int sign_of(double v) { return v > 0 ? 1 : (v < 0 ? -1 : 0); }

// One P(max)/P(min) input (the others replicated) per monotone tensor input.
void monotone_rows(const RuleCtx& c, DimRows& rows, const MonotoneFn& direction) {
  if (!direction) return;
  const int n_in = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  for (int k = 0; k < n_in; ++k) {
    const int dir = direction(c, k);
    if (dir == 0) continue;
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
      const ReduceOp out = dir > 0 ? op : (op == ReduceOp::Max ? ReduceOp::Min : ReduceOp::Max);
      for (int j = 0; j < n_in; ++j) row[j] = j == k ? P(op) : R();
      for (int j = 0; j < c.num_outputs(); ++j) row[n_in + j] = P(out);
      rows.add(row);
    }
  }
}

// Unary ops: a fixed direction in input 0.
MonotoneFn unary(int dir) {
  return [dir](const RuleCtx&, int k) { return k == 0 ? dir : 0; };
}
// Every tensor input in the same direction.
MonotoneFn all_operands(int dir) {
  return [dir](const RuleCtx&, int) { return dir; };
}
// Unary ops scaled by a scalar argument (x * s, x / s): the scalar's sign.
MonotoneFn scaled_by(const char* name) {
  return [name](const RuleCtx& c, int k) { return k == 0 ? sign_of(c.scalar(name)) : 0; };
}
// out = self_sign * self + other_sign * alpha * other (add: +1,+1; sub: +1,-1),
// or with alpha on self (rsub: other - alpha * self). Direction per schema
// position, mapped to tensor inputs (a Python-scalar `other` is no input).
MonotoneFn add_like(int self_sign, int other_sign, bool alpha_scales_self) {
  return [=](const RuleCtx& c, int k) {
    const int alpha = sign_of(c.scalar("alpha"));
    if (k == c.tensor("self")) return self_sign * (alpha_scales_self ? alpha : 1);
    if (k == c.tensor("other")) return other_sign * (alpha_scales_self ? 1 : alpha);
    return 0;
  };
}

// Broadcast-aligned shard rows for an elementwise op whose outputs all have
// the shape of output 0.
void shard_rows(const RuleCtx& c, DimRows& rows) {
  const auto& oshape = c.out(0).shape;
  const int ond = static_cast<int>(oshape.size());
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  for (int d = 0; d < ond; ++d) {
    for (int k = 0; k < c.num_inputs(); ++k) {
      const auto& ish = c.in(k).shape;
      const int i = d - (ond - static_cast<int>(ish.size()));
      row[k] = (i >= 0 && ish[i] == oshape[d]) ? S(i) : R();
    }
    for (int k = 0; k < c.num_outputs(); ++k) {
      if (c.out(k).shape != oshape) c.fail("elementwise outputs have different shapes");
      row[c.num_inputs() + k] = S(d);
    }
    rows.add(row);
  }
}

void partial_rows(const RuleCtx& c, DimRows& rows, const PointwiseSpec& spec) {
  const int n_in = c.num_inputs();
  switch (spec.linear) {
    case Linear::None:
      return;
    case Linear::Additive: {
      // x + c with a Python scalar c: avg(x_i + c) = avg(x_i) + c holds, but a
      // Partial(sum) would add c once per rank.
      std::vector<int> all(static_cast<size_t>(n_in));
      for (int k = 0; k < n_in; ++k) all[k] = k;
      PartialRows pr{{all}};
      if (n_in < 2) pr.ops = {ReduceOp::Avg};
      add_partial_rows(c, rows, pr);
      return;
    }
    case Linear::Operand: {
      PartialRows pr;
      for (int which : spec.operands)
        if (which < n_in) pr.input_sets.push_back({which});
      add_partial_rows(c, rows, pr);
      return;
    }
    case Linear::Copy:
      if (n_in == 1) add_partial_rows(c, rows, {{{0}}, PartialOutputs::All, kAllReduceOps});
      return;
  }
}

Rule pointwise_rule(PointwiseSpec spec) {
  Rule r;
  r.family = "pointwise";
  r.dims = [spec](const RuleCtx& c, DimRows& rows) {
    if (c.num_outputs() == 0) return;
    shard_rows(c, rows);
    partial_rows(c, rows, spec);
    monotone_rows(c, rows, spec.monotone);
  };
  return r;
}

// Elementwise max (or min) of its operands: non-decreasing in each, and the
// reduction itself, so all operands of its own kind together pass as well.
Rule lattice_rule(ReduceOp joint) {
  Rule r = pointwise_rule({Linear::None, {}, all_operands(+1)});
  r.dims = [joint](const RuleCtx& c, DimRows& rows) {
    if (c.num_outputs() == 0) return;
    shard_rows(c, rows);
    monotone_rows(c, rows, all_operands(+1));
    if (c.num_inputs() > 1) rows.add_uniform(P(joint));
  };
  return r;
}

// Bits of precision (mantissa) and exponent range rank of floating dtypes.
int mantissa_bits(DType d) {
  switch (d) {
    case DType::Float64: return 53;
    case DType::Float32: return 24;
    case DType::Float16: return 11;
    case DType::BFloat16: return 8;
    case DType::Float8E4M3: return 4;
    case DType::Float8E5M2: return 3;
    default: return 0;
  }
}
int exponent_bits(DType d) {
  switch (d) {
    case DType::Float64: return 11;
    case DType::Float32: return 8;
    case DType::Float16: return 5;
    case DType::BFloat16: return 8;
    case DType::Float8E4M3: return 4;
    case DType::Float8E5M2: return 5;
    default: return 0;
  }
}

// A cast that represents every source value exactly (same dtype or widening,
// e.g. bf16 -> f32) commutes with every reduction. A narrowing float cast
// rounds each rank's piece separately, so sums no longer match; rounding is
// monotone, though, so max/min still commute. Float <-> integer casts are
// monotone too (truncation toward zero, rounding of large integers) and keep
// max/min only. Bool and complex dtypes, and casts between different integer
// types (which may wrap around), take no Partial.
// Partial rows for output 0 = input `k` cast to the output's dtype (the other
// inputs replicated), by the cast's exactness as above.
void cast_partial_rows(const RuleCtx& c, DimRows& rows, int k) {
  const DType from = c.in(k).dtype, to = c.out(0).dtype;
  if (!is_floating(from) || !is_floating(to)) {
    auto integral = [](DType d) {
      return d == DType::Int64 || d == DType::Int32 || d == DType::Int16 || d == DType::Int8 || d == DType::UInt8;
    };
    const bool monotone = (is_floating(from) && integral(to)) || (integral(from) && is_floating(to)) ||
                          (integral(from) && from == to);
    if (monotone) add_partial_rows(c, rows, {{{k}}, PartialOutputs::All, {ReduceOp::Max, ReduceOp::Min}});
    return;
  }
  // An exact cast is a copy (every kind passes); a rounding one keeps only order.
  const bool exact = from == to || (mantissa_bits(to) >= mantissa_bits(from) && exponent_bits(to) >= exponent_bits(from));
  add_partial_rows(c, rows, {{{k}}, PartialOutputs::All,
                             exact ? kAllReduceOps : std::vector<ReduceOp>{ReduceOp::Max, ReduceOp::Min}});
}

Rule cast_rule() {
  Rule r;
  r.family = "pointwise";
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    if (c.num_outputs() == 0) return;
    shard_rows(c, rows);
    if (c.num_inputs() == 1) cast_partial_rows(c, rows, 0);
  };
  return r;
}

// copy(self, src) / fill.Tensor(self, value): input 1 cast to self's dtype and
// broadcast to self's shape. Self gives only its shape and dtype, so it shards
// like the output; input 1 shards where it is not broadcast and passes a Partial
// as a cast would (broadcasting copies elements).
Rule broadcast_into_rule() {
  Rule r;
  r.family = "pointwise";
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    if (c.num_outputs() != 1 || c.num_inputs() != 2) return;
    shard_rows(c, rows);
    cast_partial_rows(c, rows, 1);
  };
  return r;
}

// log_sigmoid_forward(self) -> (output, buffer) and log_sigmoid_backward(grad_output, self,
// buffer): elementwise, but the buffer is empty where the kernel keeps none (CUDA), so each
// tensor shaped like input 0 shards with it and any other stays whole. The backward is
// linear in grad_output.
Rule log_sigmoid_rule(bool backward) {
  Rule r;
  r.family = "pointwise";
  r.dims = [backward](const RuleCtx& c, DimRows& rows) {
    const auto& shape = c.in(0).shape;
    const int n_in = c.num_inputs();
    auto meta = [&](int t) -> const TensorMeta& { return t < n_in ? c.in(t) : c.out(t - n_in); };
    std::vector<Placement> row(static_cast<size_t>(rows.width()));
    for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
      for (int t = 0; t < rows.width(); ++t) row[static_cast<size_t>(t)] = meta(t).shape == shape ? S(d) : R();
      rows.add(row);
    }
    if (backward) add_partial_rows(c, rows, {{{0}}});
  };
  r.work = [](const RuleCtx& c, const OpStrategy& s) { return elementwise_work(c, s, 4.0); };
  return r;
}

}  // namespace

void register_pointwise(Registry& r) {
  add_rule(r, {"aten.log_sigmoid_forward.default"}, log_sigmoid_rule(false));
  add_rule(r, {"aten.log_sigmoid_backward.default"}, log_sigmoid_rule(true));
  const Rule plain = pointwise_rule({Linear::None, {}, {}});
  // Elementwise without a Partial row: neither linear nor monotone in every operand.
  add_rule(r,
           {"aten.abs.default",
            "aten.acos.default",
            "aten.addcdiv.default",
            "aten.addcmul.default",
            "aten.asin.default",
            "aten.atan2.default",
            "aten.bitwise_and.Scalar",
            "aten.bitwise_and.Tensor",
            "aten.bitwise_left_shift.Tensor",
            "aten.bitwise_not.default",
            "aten.bitwise_or.Scalar",
            "aten.bitwise_or.Tensor",
            "aten.bitwise_right_shift.Tensor",
            "aten.bitwise_xor.Tensor",
            "aten.cos.default",
            "aten.cosh.default",
            "aten.div.Scalar_mode",
            "aten.div.Tensor_mode",
            "aten.elu.default",
            "aten.eq.Scalar",
            "aten.eq.Tensor",
            "aten.erfinv.default",
            "aten.floor_divide.default",
            "aten.fmod.Scalar",
            "aten.fmod.Tensor",
            "aten.frac.default",
            "aten.ge.Scalar",
            "aten.ge.Tensor",
            "aten.gelu.default",
            "aten.gt.Scalar",
            "aten.gt.Tensor",
            "aten.hardswish.default",
            "aten.heaviside.default",
            "aten.isfinite.default",
            "aten.isinf.default",
            "aten.isnan.default",
            "aten.le.Scalar",
            "aten.le.Tensor",
            "aten.lerp.Scalar",
            "aten.lerp.Tensor",
            "aten.log.default",
            "aten.log10.default",
            "aten.log1p.default",
            "aten.log2.default",
            "aten.logical_and.default",
            "aten.logical_not.default",
            "aten.logical_or.default",
            "aten.logical_xor.default",
            "aten.logit.default",
            "aten.lt.Scalar",
            "aten.lt.Tensor",
            "aten.masked_fill.Scalar",
            "aten.masked_fill.Tensor",
            "aten.mish.default",
            "aten.ne.Scalar",
            "aten.ne.Tensor",
            "aten.polar.default",
            "aten.pow.Scalar",
            "aten.pow.Tensor_Scalar",
            "aten.pow.Tensor_Tensor",
            "aten.reciprocal.default",
            "aten.remainder.Scalar",
            "aten.remainder.Tensor",
            "aten.rsqrt.default",
            "aten.silu.default",
            "aten.sin.default",
            "aten.sqrt.default",
            "aten.square.default",
            "aten.tan.default",
            "aten.xlogy.Scalar_Other",
            "aten.xlogy.Tensor"},
           plain);
  // Monotone on all reals (with scalar bounds/parameters): P(max)/P(min) pass.
  add_rule(r,
           {"aten.atan.default",
            "aten.ceil.default",
            "aten.clamp.default",
            "aten.clamp_max.default",
            "aten.clamp_min.default",
            "aten.erf.default",
            "aten.exp.default",
            "aten.exp2.default",
            "aten.expm1.default",
            "aten.floor.default",
            "aten.hardsigmoid.default",
            "aten.hardtanh.default",
            "aten.relu.default",
            "aten.relu6.default",
            "aten.round.decimals",
            "aten.nan_to_num.default",
            "aten.round.default",
            "aten.sgn.default",
            "aten.sigmoid.default",
            "aten.sign.default",
            "aten.sinh.default",
            "aten.tanh.default",
            "aten.trunc.default"},
           pointwise_rule({Linear::None, {}, unary(+1)}));
  // Non-decreasing in every operand: one P(max)/P(min) operand with the others replicated.
  add_rule(r, {"aten.clamp.Tensor"}, pointwise_rule({Linear::None, {}, all_operands(+1)}));
  // max-like: also every operand P(max), since max_i max(a_i, b_i) = max(max_i a_i, max_i b_i).
  add_rule(r,
           {"aten.clamp_min.Tensor",
            "aten.fmax.default",
            "aten.maximum.default"}, lattice_rule(ReduceOp::Max));
  // min-like: also every operand P(min).
  add_rule(r,
           {"aten.clamp_max.Tensor",
            "aten.fmin.default",
            "aten.minimum.default"}, lattice_rule(ReduceOp::Min));
  // Monotone decreasing: P(max) and P(min) swap.
  add_rule(r, {"aten.erfc.default"}, pointwise_rule({Linear::None, {}, unary(-1)}));
  // x + alpha * c, x - alpha * c: non-decreasing in x; c - alpha * x: the sign of -alpha.
  add_rule(r,
           {"aten.add.Scalar",
            "aten.sub.Scalar"}, pointwise_rule({Linear::None, {}, add_like(+1, +1, false)}));
  // rsub(x, c) = c - alpha * x: monotone with the sign of -alpha.
  add_rule(r, {"aten.rsub.Scalar"}, pointwise_rule({Linear::None, {}, add_like(-1, +1, true)}));
  // leaky_relu(x, slope) is non-decreasing for slope >= 0; softplus(x, beta) for beta > 0.
  add_rule(r, {"aten.leaky_relu.default"}, pointwise_rule({Linear::None, {}, [](const RuleCtx& c, int k) {
             return k == 0 && c.scalar("negative_slope") >= 0 ? 1 : 0;
           }}));
  // softplus(x, beta) is increasing for beta > 0.
  add_rule(r, {"aten.softplus.default"}, pointwise_rule({Linear::None, {}, [](const RuleCtx& c, int k) {
             return k == 0 && c.scalar("beta") > 0 ? 1 : 0;
           }}));
  // Linear in both operands jointly.
  // Also monotone in each operand with the other replicated (P(max) + R stays P(max)).
  add_rule(r, {"aten.add.Tensor"}, pointwise_rule({Linear::Additive, {}, add_like(+1, +1, false)}));
  // a - alpha * b: linear jointly; monotone in a, and in b with the sign of -alpha.
  add_rule(r, {"aten.sub.Tensor"}, pointwise_rule({Linear::Additive, {}, add_like(+1, -1, false)}));
  // b - alpha * a: linear jointly.
  add_rule(r, {"aten.rsub.Tensor"}, pointwise_rule({Linear::Additive, {}, add_like(-1, +1, true)}));
  // where(cond, a, b) is linear in (a, b) jointly with cond replicated/sharded.
  add_rule(r, {"aten.where.self"}, [] {
    Rule w = pointwise_rule({Linear::None, {}, {}});
    w.dims = [](const RuleCtx& c, DimRows& rows) {
      shard_rows(c, rows);
      if (c.num_inputs() != 3) return;
      add_partial_rows(c, rows, {{{1, 2}}});
    };
    return w;
  }());
  // Bilinear: either operand may be the partial one.
  add_rule(r, {"aten.mul.Tensor"}, pointwise_rule({Linear::Operand, {0, 1}, {}}));
  // Linear in the first tensor (numerator / incoming gradient).
  // x * s, x / s: monotone with the scalar's sign; neg swaps max and min.
  add_rule(r,
           {"aten.div.Scalar",
            "aten.mul.Scalar"}, pointwise_rule({Linear::Operand, {0}, scaled_by("other")}));
  // Linear; max and min swap.
  add_rule(r, {"aten.neg.default"}, pointwise_rule({Linear::Operand, {0}, unary(-1)}));
  // Linear in the first operand (numerator / incoming gradient).
  add_rule(r,
           {"aten._conj.default",
            "aten.div.Tensor",
            "aten.elu_backward.default",
            "aten.gelu_backward.default",
            "aten.hardsigmoid_backward.default",
            "aten.hardswish_backward.default",
            "aten.hardtanh_backward.default",
            "aten.leaky_relu_backward.default",
            "aten.mish_backward.default",
            "aten.native_dropout_backward.default",
            "aten.sigmoid_backward.default",
            "aten.silu_backward.default",
            "aten.softplus_backward.default",
            "aten.tanh_backward.default",
            "aten.threshold_backward.default"},
           pointwise_rule({Linear::Operand, {0}, {}}));
  // Copies: every Partial kind passes.
  add_rule(r,
           {"aten.clone.default",
            "aten.contiguous.default",
            "aten.lift_fresh_copy.default",
            "aten.positive.default"},
           pointwise_rule({Linear::Copy, {}, {}}));
  // Aliases: the same placements as a copy, but no bytes move: each costs one dispatch (the
  // eager runtime runs it; a recompute of one in backward too). Not free: the values backward
  // reads are the partitioner's detaches of saved activations, and with a free recompute
  // there the solver's decode chose it at any memory price and met the real cost (the
  // attention or matmul it needs made again) only at the need nodes behind it; the 70B plan
  // at a 10 s limit came out 7% slower (docs/benchmarks_log.md, 2026-12-04).
  Rule alias = pointwise_rule({Linear::Copy, {}, {}});
  alias.work = dispatch_work;
  add_rule(r, {"aten.alias.default", "aten.detach.default"}, alias);
  // Casts: exact ones copy (every kind passes), rounding ones keep order only.
  add_rule(r,
           {"aten._to_copy.default",
            "aten.to.dtype"}, cast_rule());
  // Input 1 cast and broadcast into self's shape (self's values unused): a cast's Partial kinds.
  add_rule(r,
           {"aten.copy.default",
            "aten.fill.Tensor"}, broadcast_into_rule());
}

}  // namespace tlm::strategies
