// Normalization forward/backward: layer_norm, rms_norm (fused ops), batch norm, group norm.
//
// Layer/RMS norm normalize over trailing dims: any leading ("batch") dim can
// be sharded, with per-row statistics sharded alike and the affine parameters
// replicated; in the backward their gradients sum over the batch, so they
// come out Partial(sum). The backward is linear in the incoming gradient.
// Batch norm in training normalizes over every dim but the channel: only the
// channel can be sharded (per-channel parameters, statistics and running
// buffers sharded alike); in eval it uses the running statistics, so batch
// and spatial dims can be sharded too. Group norm: see group_norm_rows.
#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

namespace tlm::strategies {

namespace {

enum class Role { X, Stat, Param, ParamGrad, Other };

// Output roles from the schema's output list, keeping only the outputs the IR
// holds (absent gradients are None and not exported).
std::vector<Role> present_outputs(const RuleCtx& c, const std::vector<Role>& schema, const char* mask_name) {
  std::vector<Role> out;
  if (const auto positions = c.output_positions()) {
    for (const int64_t i : *positions)
      out.push_back(i >= 0 && i < static_cast<int64_t>(schema.size()) ? schema[i] : Role::Other);
  } else if (mask_name != nullptr && c.has(mask_name)) {
    const std::vector<bool> mask = c.flags(mask_name);
    for (size_t i = 0; i < schema.size() && i < mask.size(); ++i)
      if (mask[i]) out.push_back(schema[i]);
  } else {
    out = schema;
  }
  if (static_cast<int>(out.size()) != c.num_outputs()) c.fail("cannot match the op's outputs to its schema");
  return out;
}

// A tensor argument by schema name, and what it is to the norm.
struct RoleArg {
  const char* name;
  Role role;
};

// Roles of tensor inputs given by schema name.
std::vector<Role> input_roles(const RuleCtx& c, const std::vector<RoleArg>& args) {
  std::vector<Role> roles(static_cast<size_t>(c.num_inputs()), Role::Other);
  for (const auto& a : args) {
    const int k = c.tensor(a.name);
    if (k >= 0) roles[k] = a.role;
  }
  return roles;
}

// Trailing-dims norms: leading dims [0, axis) shardable.
void trailing_norm_rows(const RuleCtx& c, DimRows& rows, const std::vector<Role>& roles, int64_t axis,
                        bool backward) {
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  for (int d = 0; d < axis; ++d) {
    for (size_t t = 0; t < roles.size(); ++t) {
      switch (roles[t]) {
        case Role::X:
        case Role::Stat: row[t] = S(d); break;
        case Role::ParamGrad: row[t] = P(); break;
        default: row[t] = R();
      }
    }
    rows.add(row);
  }
  if (!backward) return;
  // Linear in grad_output (tensor input 0): every gradient output is Partial.
  add_partial_rows(c, rows, {{{0}}});
}

// Where a trailing norm op keeps what: the position of normalized_shape, the
// tensor arguments with their roles, the outputs' roles, and (backward) the
// output_mask that drops outputs.
struct TrailingNormSchema {
  std::vector<RoleArg> inputs;
  std::vector<Role> outputs;
  const char* mask_name = nullptr;
  bool backward = false;
  double flops_per_element;
};

Rule trailing_norm_rule(const TrailingNormSchema& k) {
  Rule r;
  r.family = "norm";
  r.dims = [k](const RuleCtx& c, DimRows& rows) {
    const int64_t axis = c.in(0).ndim() - static_cast<int64_t>(c.int_list("normalized_shape").size());
    std::vector<Role> roles = input_roles(c, k.inputs);
    for (Role o : present_outputs(c, k.outputs, k.mask_name)) roles.push_back(o);
    trailing_norm_rows(c, rows, roles, axis, k.backward);
  };
  const double flops = k.flops_per_element;
  r.work = [flops](const RuleCtx& c, const OpStrategy& s) { return elementwise_work(c, s, flops); };
  return r;
}

// Batch norm: tensors shaped like the input shard dim d; per-channel vectors
// (rank 1, size C) shard dim 0 when the channel is sharded; anything else
// (empty saved statistics in eval) stays replicated.
void batch_norm_rows(const RuleCtx& c, DimRows& rows, int x_input, bool training, bool backward) {
  const auto& xs = c.in(x_input).shape;
  if (xs.size() < 2) return;
  const int64_t channels = xs[1];
  auto shaped_like_x = [&](const TensorMeta& m) { return m.shape == xs; };
  auto per_channel = [&](const TensorMeta& m) { return m.ndim() == 1 && m.shape[0] == channels; };
  const int n_in = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  auto meta = [&](int t) -> const TensorMeta& { return t < n_in ? c.in(t) : c.out(t - n_in); };
  for (int d = 0; d < static_cast<int>(xs.size()); ++d) {
    if (training && d != 1) continue;
    for (int t = 0; t < rows.width(); ++t) {
      if (shaped_like_x(meta(t)))
        row[t] = S(d);
      else if (d == 1 && per_channel(meta(t)))
        row[t] = S(0);
      else if (backward && t >= n_in && per_channel(meta(t)))
        row[t] = P();  // grad_weight / grad_bias sum over the sharded batch/spatial dim
      else
        row[t] = R();
    }
    rows.add(row);
  }
  if (backward) add_partial_rows(c, rows, {{{0}}});  // linear in grad_output
}

Rule batch_norm_rule(const char* training_name, bool backward) {
  Rule r;
  r.family = "norm";
  r.dims = [=](const RuleCtx& c, DimRows& rows) {
    const bool training = c.flag(training_name);
    batch_norm_rows(c, rows, backward ? 1 : 0, training, backward);
  };
  r.work = [](const RuleCtx& c, const OpStrategy& s) { return elementwise_work(c, s, 8.0); };
  return r;
}

// Group norm normalizes each sample over its channel group and the spatial dims: the batch
// dim shards (statistics (N, group) alike, the per-channel affine parameters replicated,
// their gradients Partial), and so does the channel dim when every shard holds whole
// groups (statistics sharded on their group dim, parameters and their gradients on dim 0).
// The op takes N, C and the group count as arguments: on a rank they are its local ones.
void group_norm_rows(const RuleCtx& c, DimRows& rows, const std::vector<Role>& roles, bool backward) {
  std::vector<Placement> row(static_cast<size_t>(rows.width()));
  for (int d : {0, 1}) {
    for (size_t t = 0; t < roles.size(); ++t) {
      switch (roles[t]) {
        case Role::X:
        case Role::Stat: row[t] = S(d); break;
        case Role::Param: row[t] = d == 0 ? R() : S(0); break;
        case Role::ParamGrad: row[t] = d == 0 ? P() : S(0); break;
        default: row[t] = R();
      }
    }
    rows.add(row);
  }
  if (backward) add_partial_rows(c, rows, {{{0}}});  // linear in grad_out
}

Rule group_norm_rule(const std::vector<RoleArg>& inputs, const std::vector<Role>& outputs, const char* mask_name,
                     bool backward) {
  Rule r;
  r.family = "norm";
  auto roles_of = [=](const RuleCtx& c) {
    std::vector<Role> roles = input_roles(c, inputs);
    for (Role o : present_outputs(c, outputs, mask_name)) roles.push_back(o);
    return roles;
  };
  r.dims = [=](const RuleCtx& c, DimRows& rows) {
    const int64_t channels = c.int_arg("C"), groups = c.int_arg("group");
    // Only the replicate row for a node that is no group norm torch would run.
    if (c.in(c.tensor("input")).ndim() < 2 || groups <= 0 || channels <= 0 || channels % groups != 0) return;
    group_norm_rows(c, rows, roles_of(c), backward);
  };
  // Channel shards hold whole groups, the same number on every rank.
  r.valid = [](const RuleCtx& c, const OpStrategy& s) {
    const int x = c.tensor("input");
    int64_t ways = 1;
    for (int m : mesh_dims_sharding(s.inputs[static_cast<size_t>(x)], 1)) ways *= c.mesh().shape[static_cast<size_t>(m)];
    return c.int_arg("group") % ways == 0;  // dims offered rows only for a positive group count
  };
  r.call_args = [](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
    const int x = c.tensor("input");
    const std::vector<int64_t> local = local_shape(c.in(x).shape, c.mesh(), s.inputs[static_cast<size_t>(x)], coord);
    const int64_t channels = c.int_arg("C"), groups = c.int_arg("group");
    if (channels <= 0) return c.same_args();  // replicated: dims offers no other row
    return c.with_args({{"N", local[0]}, {"C", local[1]}, {"group", groups * local[1] / channels}});
  };
  r.work = [](const RuleCtx& c, const OpStrategy& s) { return elementwise_work(c, s, 8.0); };
  return r;
}

}  // namespace

void register_norm(Registry& r) {
  using R_ = Role;
  // native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
  add_rule(r, {"aten.native_layer_norm.default"},
           trailing_norm_rule({{{"input", R_::X}, {"weight", R_::Param}, {"bias", R_::Param}},
                               {R_::X, R_::Stat, R_::Stat},
                               nullptr, false, 8.0}));
  // native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?, output_mask)
  add_rule(r, {"aten.native_layer_norm_backward.default"},
           trailing_norm_rule({{{"grad_out", R_::X},
                                {"input", R_::X},
                                {"mean", R_::Stat},
                                {"rstd", R_::Stat},
                                {"weight", R_::Param},
                                {"bias", R_::Param}},
                               {R_::X, R_::ParamGrad, R_::ParamGrad}, "output_mask", true, 8.0}));
  // _fused_rms_norm(input, normalized_shape, weight?, eps) -> (out, rstd)
  add_rule(r, {"aten._fused_rms_norm.default"},
           trailing_norm_rule({{{"input", R_::X}, {"weight", R_::Param}}, {R_::X, R_::Stat}, nullptr, false, 6.0}));
  // _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?, output_mask)
  add_rule(r, {"aten._fused_rms_norm_backward.default"},
           trailing_norm_rule({{{"grad_out", R_::X}, {"input", R_::X}, {"rstd", R_::Stat}, {"weight", R_::Param}},
                               {R_::X, R_::ParamGrad},
                               "output_mask", true, 6.0}));
  // (input, weight, bias, running_mean, running_var, training, momentum, eps)
  add_rule(r,
           {"aten._native_batch_norm_legit.default",
            "aten._native_batch_norm_legit_functional.default",
            "aten.native_batch_norm.default"},
           batch_norm_rule("training", false));
  // _native_batch_norm_legit.no_stats(input, weight, bias, training, momentum, eps)
  add_rule(r, {"aten._native_batch_norm_legit.no_stats"}, batch_norm_rule("training", false));
  // Eval batch norm (input, weight, bias, running stats, momentum, eps): any dim of x.
  add_rule(r, {"aten._native_batch_norm_legit_no_training.default"}, [] {
    Rule e = batch_norm_rule(nullptr, false);
    e.dims = [](const RuleCtx& c, DimRows& rows) { batch_norm_rows(c, rows, 0, false, false); };
    return e;
  }());
  // native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
  add_rule(r, {"aten.native_group_norm.default"},
           group_norm_rule({{"input", R_::X}, {"weight", R_::Param}, {"bias", R_::Param}}, {R_::X, R_::Stat, R_::Stat},
                           nullptr, false));
  // native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
  add_rule(r, {"aten.native_group_norm_backward.default"},
           group_norm_rule({{"grad_out", R_::X}, {"input", R_::X}, {"mean", R_::Stat}, {"rstd", R_::Stat},
                            {"weight", R_::Param}},
                           {R_::X, R_::ParamGrad, R_::ParamGrad}, "output_mask", true));
  // native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
  //                            train, eps, output_mask)
  add_rule(r, {"aten.native_batch_norm_backward.default"}, batch_norm_rule("train", true));
}

}  // namespace tlm::strategies
