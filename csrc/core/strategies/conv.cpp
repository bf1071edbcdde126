// Convolution forward/backward and pooling.
//
// Convolution is a contraction over input channels and the kernel window:
// shard the batch (weight replicated), the output channels (weight dim 0,
// bias alike), or the input channels in input and weight (output
// Partial(sum), bias Partial too). Spatial dims are not sharded: windows
// overlap shard boundaries (halo exchange is not a local op). Channel splits
// are offered for groups == 1 only. Transposed convolutions swap the weight's
// channel dims. The op is linear in input and in weight separately.
// Pooling works on each (batch, channel) plane independently: those dims
// shard freely; average pooling and the backward ops are linear. Reflection and
// replication padding shard like pooling. im2col/col2im (unfold/fold) shard the batch
// and whole channels.
#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

namespace tlm::strategies {

namespace {

enum class Out { GradInput, GradWeight, GradBias };

std::vector<Out> present_grads(const RuleCtx& c) {
  std::vector<Out> all = {Out::GradInput, Out::GradWeight, Out::GradBias}, out;
  if (const auto positions = c.output_positions()) {
    for (const int64_t p : *positions) out.push_back(all.at(static_cast<size_t>(p)));
  } else {
    const std::vector<bool> mask = c.flags("output_mask");
    for (size_t i = 0; i < 3 && i < mask.size(); ++i)
      if (mask[i]) out.push_back(all[i]);
  }
  if (static_cast<int>(out.size()) != c.num_outputs()) c.fail("cannot match outputs to grad_input/weight/bias");
  return out;
}

void conv_rows(const RuleCtx& c, DimRows& rows) {
  // (input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
  const bool transposed = c.flag("transposed");
  const int64_t groups = c.int_arg("groups");
  const int bias = c.tensor("bias");
  const int w_out = transposed ? 1 : 0, w_in = transposed ? 0 : 1;
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  const int out = c.num_inputs();
  auto reset = [&] { std::fill(row.begin(), row.end(), R()); };
  reset();
  row[0] = S(0);
  row[out] = S(0);
  rows.add(row);
  if (groups == 1) {
    reset();
    row[1] = S(w_out);
    if (bias >= 0) row[bias] = S(0);
    row[out] = S(1);
    rows.add(row);
    reset();
    row[0] = S(1);
    row[1] = S(w_in);
    if (bias >= 0) row[bias] = P();
    row[out] = P();
    rows.add(row);
  }
  // Bilinear in (input, weight); the bias must be Partial with the product.
  add_partial_rows(c, rows, {{{0, bias}, {1, bias}}});
}

void conv_backward_rows(const RuleCtx& c, DimRows& rows) {
  // (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
  //  output_mask) -> (grad_input?, grad_weight?, grad_bias?)
  const bool transposed = c.flag("transposed");
  const int64_t groups = c.int_arg("groups");
  const int w_out = transposed ? 1 : 0, w_in = transposed ? 0 : 1;
  const auto outs = present_grads(c);
  const int n_in = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  auto set_out = [&](Out which, Placement p) {
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k] == which) row[n_in + k] = p;
  };
  // batch
  row = {S(0), S(0), R()};
  row.resize(static_cast<size_t>(rows.width()), R());
  set_out(Out::GradInput, S(0));
  set_out(Out::GradWeight, P());
  set_out(Out::GradBias, P());
  rows.add(row);
  if (groups == 1) {
    // output channels
    std::fill(row.begin(), row.end(), R());
    row[0] = S(1);
    row[2] = S(w_out);
    set_out(Out::GradInput, P());
    set_out(Out::GradWeight, S(w_out));
    set_out(Out::GradBias, S(0));
    rows.add(row);
    // input channels
    std::fill(row.begin(), row.end(), R());
    row[1] = S(1);
    row[2] = S(w_in);
    set_out(Out::GradInput, S(1));
    set_out(Out::GradWeight, S(w_in));
    set_out(Out::GradBias, R());
    rows.add(row);
  }
  add_partial_rows(c, rows, {{{0}}});  // linear in grad_output
}

// 2 * (output elements) * (input channels per group) * (kernel elements).
OpWork conv_work(const RuleCtx& c, const OpStrategy& s, bool backward) {
  const int x = backward ? 1 : 0, w = backward ? 2 : 1;
  auto ws = local_shape_in(c, s, w);
  const bool transposed = c.flag("transposed");
  double kernel = 1;
  for (size_t i = 2; i < ws.size(); ++i) kernel *= static_cast<double>(ws[i]);
  double flops;
  if (!transposed) {
    // output numel (local) from grad_output / output, times Cin/groups * kernel
    auto os = backward ? local_shape_in(c, s, 0) : local_shape_out(c, s, 0);
    double on = 1;  // local output elements (local output channels included)
    for (auto v : os) on *= static_cast<double>(v);
    flops = 2.0 * on * static_cast<double>(ws[1]) * kernel;
  } else {
    auto xs = local_shape_in(c, s, x);
    double xn = 1;
    for (auto v : xs) xn *= static_cast<double>(v);
    flops = 2.0 * xn * static_cast<double>(ws[1]) * kernel;
  }
  OpWork wk;
  wk.flops = backward ? 2.0 * flops : flops;
  wk.bytes = io_bytes(c, s);
  return wk;
}

// Pooling: (batch, channel) dims -- all but the last `spatial` -- shard freely.
void pool_rows(const RuleCtx& c, DimRows& rows, int spatial, bool linear_in_first) {
  const int64_t nd = c.in(0).ndim();
  for (int d = 0; d < nd - spatial; ++d) rows.add_uniform(S(d));
  if (!linear_in_first) return;
  add_partial_rows(c, rows, {{{0}}});
}

// Pooling kernels (adaptive max pooling among them) refuse inputs with an empty
// non-batch dim, which an uneven shard of the channel dim can leave on a rank.
bool no_empty_non_batch_shard(const RuleCtx& c, const OpStrategy& s) {
  auto ok = [&](const TensorMeta& t, const PlacementSpec& spec) {
    for (int d = 1; d < static_cast<int>(t.ndim()); ++d)
      if (!no_empty_shard(t.shape[d], c.mesh(), spec, d)) return false;
    return true;
  };
  for (int k = 0; k < c.num_inputs(); ++k)
    if (!ok(c.in(k), s.inputs[k])) return false;
  for (int k = 0; k < c.num_outputs(); ++k)
    if (!ok(c.out(k), s.outputs[k])) return false;
  return true;
}

Rule pool_rule(int spatial, bool linear) {
  Rule r;
  r.family = "conv";
  r.dims = [=](const RuleCtx& c, DimRows& rows) { pool_rows(c, rows, spatial, linear); };
  r.valid = no_empty_non_batch_shard;
  return r;
}

// im2col (unfold) and col2im (fold): a column's rows are channel-major, channel c's window
// at rows [c*kk, (c+1)*kk). The batch dim shards alike on both sides; channels shard as
// the column dim's blocks only where every rank holds whole channels of an even split
// (torch's chunks of C*kk rows match its chunks of C channels then). Window positions
// cross rows and columns, so they stay whole. Both ops are linear.
void unfold_rows(const RuleCtx& c, DimRows& rows) {
  const int64_t nd = c.in(0).ndim();
  const int batch = nd == (c.n.op == "aten.im2col.default" ? 4 : 3) ? 1 : 0;  // unbatched inputs have none
  if (batch == 1) rows.add_uniform(S(0));
  rows.add_uniform(S(batch));
  add_partial_rows(c, rows, {{{0}}});
}

bool channels_split_evenly(const RuleCtx& c, const OpStrategy& s) {
  // The side with C channels: im2col's input, col2im's output.
  const bool im2col = c.n.op == "aten.im2col.default";
  const TensorMeta& t = im2col ? c.in(0) : c.out(0);
  const PlacementSpec& spec = im2col ? s.inputs[0] : s.outputs[0];
  const int channel = t.ndim() == 4 ? 1 : 0;
  return evenly_sharded(t.shape[static_cast<size_t>(channel)], c.mesh(), spec, channel);
}

}  // namespace

void register_conv(Registry& r) {
  Rule f;
  f.family = "conv";
  f.dims = conv_rows;
  f.work = [](const RuleCtx& c, const OpStrategy& s) { return conv_work(c, s, false); };
  // Convolution: batch, out-channel, or Partial over in-channels (a contraction).
  add_rule(r, {"aten.convolution.default"}, f);
  Rule b;
  b.family = "conv";
  b.dims = conv_backward_rows;
  b.work = [](const RuleCtx& c, const OpStrategy& s) { return conv_work(c, s, true); };
  // bias_sizes sets grad_bias's shape: on a rank it is the local number of output channels.
  b.call_args = [](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
    const auto outs = present_grads(c);
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k] == Out::GradBias)
        return c.with_args({{"bias_sizes", local_shape(c.out(static_cast<int>(k)).shape, c.mesh(), s.outputs[k], coord)}});
    return c.same_args();
  };
  // Its gradients: the same three splits, seen from grad_output.
  add_rule(r, {"aten.convolution_backward.default"}, b);

  // Max pooling: batch and channel dims shard; spatial dims stay whole.
  add_rule(r,
           {"aten.adaptive_max_pool2d.default",
            "aten.max_pool2d.default",
            "aten.max_pool2d_with_indices.default"},
           pool_rule(2, false));
  add_rule(r, {"aten.max_pool3d_with_indices.default"}, pool_rule(3, false));
  add_rule(r, {"aten.max_pool1d.default"}, pool_rule(1, false));
  // Average pooling: the same shards, and linear in its input (Partial sum/avg pass).
  add_rule(r,
           {"aten._adaptive_avg_pool2d.default",
            "aten.avg_pool2d.default"}, pool_rule(2, true));
  add_rule(r, {"aten.avg_pool3d.default"}, pool_rule(3, true));
  add_rule(r, {"aten.avg_pool1d.default"}, pool_rule(1, true));
  // Antialiased resampling (interpolate(..., antialias=True): a position embedding resized to
  // another image size), which torch does not decompose: batch and channel dims shard, the
  // spatial ones stay whole; linear in its input. The backward's input_size is the rank's.
  add_rule(r,
           {"aten._upsample_bicubic2d_aa.default",
            "aten._upsample_bilinear2d_aa.default"},
           pool_rule(2, true));
  {
    Rule aa_backward = pool_rule(2, true);
    aa_backward.call_args = output_shape_arg("input_size");
    add_rule(r,
             {"aten._upsample_bicubic2d_aa_backward.default",
              "aten._upsample_bilinear2d_aa_backward.default"},
             aa_backward);
  }
  // Backward ops: linear in grad_output.
  add_rule(r,
           {"aten._adaptive_avg_pool2d_backward.default",
            "aten.adaptive_max_pool2d_backward.default",
            "aten.avg_pool2d_backward.default",
            "aten.max_pool2d_with_indices_backward.default"},
           pool_rule(2, true));
  {
    Rule u;
    u.family = "conv";
    u.dims = unfold_rows;
    u.valid = channels_split_evenly;
    // Sliding windows as columns and back (F.unfold / F.fold): batch and whole channels shard.
    add_rule(r,
             {"aten.col2im.default",
              "aten.im2col.default"}, u);
  }
  // Reflection and replication padding of the last 1-3 dims: the leading dims shard freely;
  // each output element copies one input element (linear), and the backward adds them back
  // (linear in grad_output).
  add_rule(r,
           {"aten.reflection_pad1d.default",
            "aten.reflection_pad1d_backward.default",
            "aten.replication_pad1d.default",
            "aten.replication_pad1d_backward.default"},
           pool_rule(1, true));
  add_rule(r,
           {"aten.reflection_pad2d.default",
            "aten.reflection_pad2d_backward.default",
            "aten.replication_pad2d.default",
            "aten.replication_pad2d_backward.default"},
           pool_rule(2, true));
  add_rule(r,
           {"aten.reflection_pad3d.default",
            "aten.reflection_pad3d_backward.default",
            "aten.replication_pad3d.default",
            "aten.replication_pad3d_backward.default"},
           pool_rule(3, true));
  // 3-D pooling backward: linear in grad_output.
  add_rule(r,
           {"aten.avg_pool3d_backward.default",
            "aten.max_pool3d_with_indices_backward.default"}, pool_rule(3, true));
}

}  // namespace tlm::strategies
