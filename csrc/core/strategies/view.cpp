// Views, reshapes and data movement: view/reshape (shape factoring),
// permute/transpose/t, expand, squeeze/unsqueeze, slice/select, cat/stack,
// split/split_with_sizes/unbind, flatten/unflatten.
//
// All of them move or alias elements without combining them, so every
// Partial kind passes through unchanged. A shard passes from an input dim to
// the output dim holding the same elements. For reshapes, dims are grouped
// into minimal runs with equal products (e.g. (4,6)->(24) or (2,12)); within a
// multi-dim group only the leading dim can stay sharded, and only when every
// rank's piece of it maps to exactly its piece of the output's leading dim --
// checked per rank on the combined strategy, since uneven chunks usually break
// that. Shape arguments are rewritten per rank from the output's local shape.
// as_strided/as_strided_scatter shard only where their strides make them a
// reshape (see strided_rule).
#include <algorithm>

#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

namespace tlm::strategies {

namespace {

// Views move elements without combining them: every Partial kind passes.
void partial_passthrough(DimRows& rows) {
  for (ReduceOp op : kAllReduceOps) rows.add_uniform(P(op));
}

// Rows for a single-input op where input dim i becomes output dim map[i]
// (-1: gone), for every output.
void mapped_rows(const RuleCtx& c, DimRows& rows, const std::vector<int>& map) {
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  for (size_t i = 0; i < map.size(); ++i) {
    if (map[i] < 0) continue;
    if (c.in(0).shape[i] != c.out(0).shape[map[i]]) continue;
    row[0] = S(static_cast<int>(i));
    for (int k = 0; k < c.num_outputs(); ++k) row[1 + k] = S(map[i]);
    rows.add(row);
  }
  // A bool tensor has no Partial kind (sum/avg of flags means nothing).
  if (c.in(0).dtype != DType::Bool) partial_passthrough(rows);
}

Rule mapped_rule(std::function<std::vector<int>(const RuleCtx&)> map_fn, bool is_view = true) {
  Rule r;
  r.family = "view";
  r.dims = [map_fn](const RuleCtx& c, DimRows& rows) { mapped_rows(c, rows, map_fn(c)); };
  if (is_view) r.work = no_work;
  return r;
}

// ---- reshape by shape factoring ----

struct Group {
  std::vector<int> in, out;  // dims (size > 1) of one group, ascending
};

// Minimal groups of non-singleton dims with equal products; empty when either
// side has a zero-size dim (nothing to shard then).
std::vector<Group> factor_groups(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int> ia, ib;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == 0) return {};
    if (a[i] != 1) ia.push_back(static_cast<int>(i));
  }
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] == 0) return {};
    if (b[i] != 1) ib.push_back(static_cast<int>(i));
  }
  std::vector<Group> out;
  size_t x = 0, y = 0;
  while (x < ia.size() && y < ib.size()) {
    Group g;
    int64_t pa = a[ia[x]], pb = b[ib[y]];
    g.in.push_back(ia[x++]);
    g.out.push_back(ib[y++]);
    while (pa != pb) {
      if (pa < pb) {
        if (x >= ia.size()) return {};
        pa *= a[ia[x]];
        g.in.push_back(ia[x++]);
      } else {
        if (y >= ib.size()) return {};
        pb *= b[ib[y]];
        g.out.push_back(ib[y++]);
      }
    }
    out.push_back(std::move(g));
  }
  if (x != ia.size() || y != ib.size()) return {};
  return out;
}

int64_t prod_tail(const std::vector<int64_t>& shape, const std::vector<int>& dims) {
  int64_t p = 1;
  for (size_t i = 1; i < dims.size(); ++i) p *= shape[dims[i]];
  return p;
}

// Reshape of input `k` into output 0. Any other input (as_strided_scatter's self,
// whose every element is overwritten) has the output's shape and follows it.
void reshape_rows_from(const RuleCtx& c, DimRows& rows, int k) {
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  for (const Group& g : factor_groups(c.in(k).shape, c.out(0).shape)) {
    for (int j = 0; j < c.num_inputs(); ++j) row[j] = S(j == k ? g.in[0] : g.out[0]);
    for (int j = 0; j < c.num_outputs(); ++j) row[c.num_inputs() + j] = S(g.out[0]);
    rows.add(row);
  }
  partial_passthrough(rows);
}

void reshape_rows(const RuleCtx& c, DimRows& rows) { reshape_rows_from(c, rows, 0); }

// Every rank's piece of the leading input dim must be exactly its piece of the
// leading output dim (in flat elements of the group). Groups are factored once
// per node; only multi-dim groups need the per-rank check.
ValidFn reshape_exact_from(const RuleCtx& c, int k) {
  struct Check {
    int di, dout;
    int64_t inner_a, inner_b;
  };
  const auto& a = c.in(k).shape;
  const auto& b = c.out(0).shape;
  std::vector<Check> checks;
  for (const Group& g : factor_groups(a, b))
    if (g.in.size() > 1 || g.out.size() > 1) checks.push_back({g.in[0], g.out[0], prod_tail(a, g.in), prod_tail(b, g.out)});
  if (checks.empty()) return nullptr;
  return [checks, k](const RuleCtx& c, const OpStrategy& s) {
    const auto& a = c.in(k).shape;
    const auto& b = c.out(0).shape;
    for (const Check& ch : checks) {
      bool sharded = false;
      for (const auto& p : s.inputs[k]) sharded = sharded || p.is_shard(ch.di);
      if (!sharded) continue;
      const auto ea = all_extents(a[ch.di], c.mesh(), s.inputs[k], ch.di);
      const auto eb = all_extents(b[ch.dout], c.mesh(), s.outputs[0], ch.dout);
      if (ea.size() != eb.size()) return false;
      for (size_t r = 0; r < ea.size(); ++r)
        if (ea[r].offset * ch.inner_a != eb[r].offset * ch.inner_b ||
            ea[r].length * ch.inner_a != eb[r].length * ch.inner_b)
          return false;
    }
    return true;
  };
}

ValidFn reshape_exact(const RuleCtx& c) { return reshape_exact_from(c, 0); }

std::vector<int64_t> local_out_shape(const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
  return local_shape(c.out(0).shape, c.mesh(), s.outputs[0], coord);
}

// `size_name`: the argument that holds the output's shape (nullptr: none).
Rule reshape_rule(const char* size_name) {
  Rule r;
  r.family = "view";
  r.dims = reshape_rows;
  r.make_valid = reshape_exact;
  r.work = no_work;
  if (size_name != nullptr)
    r.call_args = [=](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
      return c.with_args({{size_name, local_out_shape(c, s, coord)}});
    };
  return r;
}

// ---- individual ops ----

std::vector<int> identity_map(int64_t nd) {
  std::vector<int> m(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) m[i] = i;
  return m;
}

std::vector<int> permute_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  auto dims = c.int_list("dims");
  std::vector<int> m(static_cast<size_t>(nd), -1);
  for (size_t j = 0; j < dims.size(); ++j) m[wrap_dim(dims[j], nd)] = static_cast<int>(j);
  return m;
}

std::vector<int> transpose_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  auto m = identity_map(nd);
  if (nd == 0) return m;
  const int d0 = wrap_dim(c.int_arg("dim0"), nd), d1 = wrap_dim(c.int_arg("dim1"), nd);
  std::swap(m[d0], m[d1]);
  return m;
}

// unfold(self, dimension, size, step): sliding windows along `dimension`, whose count
// replaces it, each window's elements in a new last dim. Every other dim keeps its place
// and its shard; the windowed dim stays whole (windows cross shard edges).
std::vector<int> unfold_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  auto m = identity_map(nd);
  if (nd > 0) m[static_cast<size_t>(wrap_dim(c.int_arg("dimension"), nd))] = -1;
  return m;
}

// unfold_backward(grad_in, input_sizes, dim, size, step): the windows' gradients summed back
// into input_sizes. grad_in's dims other than `dim` and the window dim map to the output's
// alike; it sums overlapping windows, so it is linear (sum and avg pass) but not monotone.
Rule unfold_backward_rule() {
  Rule r;
  r.family = "view";
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    const int64_t nd = c.out(0).ndim();
    if (c.in(0).ndim() != nd + 1) return;
    const int dim = nd > 0 ? wrap_dim(c.int_arg("dim"), nd) : -1;
    for (int d = 0; d < nd; ++d)
      if (d != dim && c.in(0).shape[static_cast<size_t>(d)] == c.out(0).shape[static_cast<size_t>(d)])
        rows.add({S(d), S(d)});
    add_partial_rows(c, rows, {{{0}}});
  };
  r.call_args = output_shape_arg("input_sizes");
  return r;
}

std::vector<int> t_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  auto m = identity_map(nd);
  if (nd == 2) std::swap(m[0], m[1]);
  return m;
}

std::vector<int> unsqueeze_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  const int d = wrap_dim(c.int_arg("dim"), nd + 1);
  std::vector<int> m(static_cast<size_t>(nd));
  for (int i = 0; i < nd; ++i) m[i] = i < d ? i : i + 1;
  return m;
}

// Dims a squeeze variant may remove: its listed dims (all dims for squeeze.default).
std::vector<bool> squeeze_candidates(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  std::vector<bool> cand(static_cast<size_t>(nd), false);
  if (c.n.op == "aten.squeeze.default") {
    cand.assign(static_cast<size_t>(nd), true);
  } else {
    for (auto d : c.int_list("dim"))
      if (nd > 0) cand[wrap_dim(d, nd)] = true;
  }
  return cand;
}

std::vector<int> squeeze_map(const RuleCtx& c) {
  const auto cand = squeeze_candidates(c);
  const auto& shape = c.in(0).shape;
  std::vector<int> m(shape.size(), -1);
  int j = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    if (!(cand[i] && shape[i] == 1)) m[i] = j++;
  return m;
}

// A squeeze applied locally would also drop a sharded dim whose local piece
// has size 1, so no rank may hold a single element of a candidate dim.
bool squeeze_keeps_local_dims(const RuleCtx& c, const OpStrategy& s) {
  const auto cand = squeeze_candidates(c);
  const auto& shape = c.in(0).shape;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!cand[d] || mesh_dims_sharding(s.inputs[0], static_cast<int>(d)).empty()) continue;
    for (const auto& e : all_extents(shape[d], c.mesh(), s.inputs[0], static_cast<int>(d)))
      if (e.length == 1) return false;
  }
  return true;
}

std::vector<int> select_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  const int d = wrap_dim(c.int_arg("dim"), nd);
  std::vector<int> m(static_cast<size_t>(nd), -1);
  for (int i = 0; i < nd; ++i) m[i] = i < d ? i : (i == d ? -1 : i - 1);
  return m;
}

std::vector<int> slice_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  auto m = identity_map(nd);
  const int d = wrap_dim(c.int_arg("dim"), nd);
  // A slice that keeps the whole dim is an identity on it and may stay sharded.
  if (c.in(0).shape[d] != c.out(0).shape[d]) m[d] = -1;
  return m;
}

// flip(dims): a flipped dim reverses which rank holds which piece, so it stays
// whole; the others keep their shards.
std::vector<int> flip_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  auto m = identity_map(nd);
  if (nd == 0) return m;
  for (int64_t d : c.int_list("dims")) m[wrap_dim(d, nd)] = -1;
  return m;
}

// repeat(repeats): tiles the input, with len(repeats) - ndim new leading dims. A dim
// repeated once keeps its shard (tiling a shard is then the shard of the tiling); a
// dim tiled more than once would interleave the ranks' pieces, so it stays whole.
// Linear in the input: every Partial kind passes through.
std::vector<int> repeat_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  const int64_t lead = c.out(0).ndim() - nd;
  std::vector<int> m(static_cast<size_t>(nd));
  for (int64_t d = 0; d < nd; ++d) m[d] = static_cast<int>(d + lead);  // mapped_rows drops tiled dims
  return m;
}

// tril/triu(diagonal): which entries are zeroed depends on the global (row, col)
// index, so the last two dims stay whole; leading (batch) dims keep their shards.
// Zeroed entries are 0 on every rank, which every Partial kind reduces to 0.
std::vector<int> triangle_map(const RuleCtx& c) {
  const int64_t nd = c.in(0).ndim();
  auto m = identity_map(nd);
  for (int64_t d = std::max<int64_t>(0, nd - 2); d < nd; ++d) m[d] = -1;
  return m;
}

// view_as_complex: the trailing (real, imag) pair of size 2 becomes one complex
// element; view_as_real the reverse. Other dims map one to one.
std::vector<int> view_as_complex_map(const RuleCtx& c) {
  auto m = identity_map(c.in(0).ndim());
  if (!m.empty()) m.back() = -1;
  return m;
}

std::vector<int> view_as_real_map(const RuleCtx& c) { return identity_map(c.in(0).ndim()); }

// constant_pad_nd(self, pad, value): dims whose size the pad changes stay whole.
// Padding with `value` commutes with a Partial kind when the reduction of the
// ranks' pads is the pad: max/min always, avg always, sum only for value 0.
Rule constant_pad_rule() {
  Rule r;
  r.family = "view";
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    const auto& in = c.in(0).shape;
    const auto& out = c.out(0).shape;
    std::vector<Placement> row(2);
    for (size_t d = 0; d < in.size() && d < out.size(); ++d) {
      if (in[d] != out[d]) continue;
      row[0] = row[1] = S(static_cast<int>(d));
      rows.add(row);
    }
    const bool zero = c.scalar("value") == 0.0;
    add_partial_rows(c, rows, {{{0}}, PartialOutputs::All,
                               zero ? kAllReduceOps : std::vector<ReduceOp>{ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min}});
  };
  return r;
}

// expand: broadcast dims (new or size 1) become sharded outputs of a replicated input.
void expand_rows(const RuleCtx& c, DimRows& rows) {
  const auto& is = c.in(0).shape;
  const auto& os = c.out(0).shape;
  const int off = static_cast<int>(os.size()) - static_cast<int>(is.size());
  for (int d = 0; d < static_cast<int>(os.size()); ++d) {
    const int i = d - off;
    if (i >= 0 && is[i] == os[d])
      rows.add({S(i), S(d)});
    else
      rows.add({R(), S(d)});
  }
  partial_passthrough(rows);
}

// cat / stack: every input sharded alike on a dim other than the joined one.
void join_rows(const RuleCtx& c, DimRows& rows, bool stack) {
  const int n_in = c.num_inputs();
  if (n_in == 0) return;
  const int64_t ond = c.out(0).ndim();
  const int64_t ind = c.in(0).ndim();
  for (int k = 0; k < n_in; ++k)
    if (c.in(k).ndim() != ind) {  // legacy cat of 1-D empty tensors: replicate only
      partial_passthrough(rows);
      return;
    }
  const int d = wrap_dim(c.int_arg("dim"), stack ? ind + 1 : ind);
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  for (int i = 0; i < ind; ++i) {
    if (!stack && i == d) continue;
    const int o = stack ? (i < d ? i : i + 1) : i;
    if (o >= ond) continue;
    for (int k = 0; k < n_in; ++k) row[k] = S(i);
    row[n_in] = S(o);
    rows.add(row);
  }
  partial_passthrough(rows);
}

// split / split_with_sizes / unbind: every output sharded alike off the split dim.
void split_rows(const RuleCtx& c, DimRows& rows, bool drops_dim) {
  const int64_t nd = c.in(0).ndim();
  const int d = wrap_dim(c.int_arg("dim"), nd);
  std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
  for (int i = 0; i < nd; ++i) {
    if (i == d) continue;
    row[0] = S(i);
    const int o = drops_dim && i > d ? i - 1 : i;
    for (int k = 0; k < c.num_outputs(); ++k) row[1 + k] = S(o);
    rows.add(row);
  }
  partial_passthrough(rows);
}

// ---- strided views of storage ----
//
// as_strided(self, size, stride, storage_offset) and as_strided_scatter(self, src,
// size, stride, storage_offset) address self's storage, which a rank's piece does
// not share with the whole. One case is a reshape, so it shards like one: `size`
// with its contiguous strides, no storage offset, every element of a self that was
// contiguous when traced (the exporter's "contiguous_inputs"; the runtime keeps such
// inputs contiguous), and for the scatter a src that covers all of self. Any other
// strides stay whole. Every output element copies one element of self (or src), so
// (self, src) Partial together pass every kind whatever the strides.

// The tensor input (0: as_strided's self, 1: the scatter's src) that the strided
// view reshapes, or -1 when the strides are anything but a reshape.
int strided_reshape_source(const RuleCtx& c) {
  const bool scatter = c.n.op == "aten.as_strided_scatter.default";
  const int k = scatter ? 1 : 0;
  if (c.num_inputs() != k + 1 || c.num_outputs() != 1) return -1;
  const auto flags = c.contiguous_inputs();
  if (!flags || flags->size() != static_cast<size_t>(c.num_inputs())) return -1;
  for (bool f : *flags)
    if (!f) return -1;
  const auto off = c.opt_int("storage_offset");
  if (off && *off != 0) return -1;
  const auto size = c.int_list("size");
  const auto stride = c.int_list("stride");
  // The viewed shape: as_strided's output, the scatter's src (its output has self's shape).
  const auto& viewed = scatter ? c.in(1).shape : c.out(0).shape;
  if (size != viewed || c.in(k).numel() != c.in(0).numel()) return -1;
  if (scatter && c.out(0).shape != c.in(0).shape) return -1;
  int64_t numel = 1;
  for (int64_t n : size) numel *= n;
  if (numel != c.in(0).numel()) return -1;  // every element of self, once
  return dense_strides(size, stride) ? k : -1;
}

Rule strided_rule() {
  Rule r;
  r.family = "view";
  r.dims = [](const RuleCtx& c, DimRows& rows) {
    if (c.num_outputs() != 1) return;
    const int k = strided_reshape_source(c);
    if (c.n.op == "aten.as_strided.default" && k == 0) {
      reshape_rows_from(c, rows, 0);  // its Partial rows included
      return;
    }
    if (k == 1) {
      std::vector<Placement> row(3, R());
      for (const Group& g : factor_groups(c.in(1).shape, c.out(0).shape)) {
        row[0] = row[2] = S(g.out[0]);
        row[1] = S(g.in[0]);
        rows.add(row);
      }
    }
    if (c.in(0).dtype == DType::Bool) return;
    std::vector<int> all(static_cast<size_t>(c.num_inputs()));
    for (int j = 0; j < c.num_inputs(); ++j) all[j] = j;
    add_partial_rows(c, rows, {{all}, PartialOutputs::All, kAllReduceOps});
  };
  r.make_valid = [](const RuleCtx& c) -> ValidFn {
    const int k = strided_reshape_source(c);
    return k < 0 ? nullptr : reshape_exact_from(c, k);
  };
  // A sharded reshape addresses the rank's piece: local size, its contiguous strides,
  // and the piece's own storage offset (null; a redistributed piece may start inside
  // a larger buffer). Unsharded calls keep their arguments as traced.
  r.call_args = [](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
    const int k = strided_reshape_source(c);
    if (k < 0) return c.same_args();
    bool sharded = false;
    for (const auto& spec : s.inputs)
      for (const auto& p : spec) sharded = sharded || p.is_shard();
    if (!sharded) return c.same_args();
    const auto local = k == 1 ? local_shape(c.in(1).shape, c.mesh(), s.inputs[1], coord)
                              : local_shape(c.out(0).shape, c.mesh(), s.outputs[0], coord);
    // Positional or keyword, as traced; an absent (or None) storage_offset stays as it is.
    if (!c.has("storage_offset"))
      return c.with_args({{"size", local}, {"stride", contiguous_strides(local)}});
    return c.with_args({{"size", local}, {"stride", contiguous_strides(local)}, {"storage_offset", nullptr}});
  };
  return r;
}

}  // namespace

void register_view(Registry& r) {
  // Reshapes: dims factored into groups; only a group's leading dim keeps a shard.
  add_rule(r,
           {"aten._unsafe_view.default",
            "aten.view.default"}, reshape_rule("size"));
  add_rule(r, {"aten.reshape.default"}, reshape_rule("shape"));
  // flatten(start_dim, end_dim): a reshape.
  add_rule(r, {"aten.flatten.using_ints"}, reshape_rule(nullptr));
  {
    Rule u = reshape_rule(nullptr);
    u.call_args = [](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
      const int d = wrap_dim(c.int_arg("dim"), c.in(0).ndim());
      const size_t n = c.int_list("sizes").size();
      auto local = local_shape(c.out(0).shape, c.mesh(), s.outputs[0], coord);
      std::vector<int64_t> sizes(local.begin() + d, local.begin() + d + static_cast<int64_t>(n));
      return c.with_args({{"sizes", sizes}});
    };
    // unflatten(dim, sizes): a reshape, sizes rewritten per rank.
    add_rule(r, {"aten.unflatten.int"}, u);
  }
  // Dims move; shards move with them.
  add_rule(r, {"aten.permute.default"}, mapped_rule(permute_map));
  // Two dims swap.
  add_rule(r, {"aten.transpose.int"}, mapped_rule(transpose_map));
  // Sliding windows (Tensor.unfold: time series patches, im2col by hand) and their gradient.
  add_rule(r, {"aten.unfold.default"}, mapped_rule(unfold_map));
  add_rule(r, {"aten.unfold_backward.default"}, unfold_backward_rule());
  // 2-D transposes.
  add_rule(r,
           {"aten.numpy_T.default",
            "aten.t.default"}, mapped_rule(t_map));
  // A new size-1 dim.
  add_rule(r, {"aten.unsqueeze.default"}, mapped_rule(unsqueeze_map));
  {
    Rule sq = mapped_rule(squeeze_map);
    sq.valid = squeeze_keeps_local_dims;
    // Size-1 dims go (a shard never sits on one).
    add_rule(r,
             {"aten.squeeze.default",
              "aten.squeeze.dim",
              "aten.squeeze.dims"}, sq);
  }
  // The selected dim goes; others keep their shards.
  add_rule(r, {"aten.select.int"}, mapped_rule(select_map));
  // The sliced dim stays whole; others keep their shards.
  add_rule(r, {"aten.slice.Tensor"}, mapped_rule(slice_map));
  {
    Rule e;
    e.family = "view";
    e.dims = expand_rows;
    e.work = no_work;
    e.call_args = [](const RuleCtx& c, const OpStrategy& s, const std::vector<int64_t>& coord) {
      return c.with_args({{"size", local_out_shape(c, s, coord)}});
    };
    // Broadcast dims cannot be sharded from a size-1 input; others follow the input.
    add_rule(r, {"aten.expand.default"}, e);
  }
  {
    Rule j;
    j.family = "view";
    j.dims = [](const RuleCtx& c, DimRows& rows) { join_rows(c, rows, false); };
    // Concatenation: every dim but `dim` shards alike in all inputs.
    add_rule(r, {"aten.cat.default"}, j);
    j.dims = [](const RuleCtx& c, DimRows& rows) { join_rows(c, rows, true); };
    // Stacking: a new dim; the others shard alike.
    add_rule(r, {"aten.stack.default"}, j);
  }
  {
    Rule s;
    s.family = "view";
    s.work = no_work;
    s.dims = [](const RuleCtx& c, DimRows& rows) { split_rows(c, rows, false); };
    // Splits along `dim`: other dims shard alike in every piece.
    add_rule(r,
             {"aten.split.Tensor",
              "aten.split_with_sizes.default"}, s);
    s.dims = [](const RuleCtx& c, DimRows& rows) { split_rows(c, rows, true); };
    // unbind(dim): the dim goes from every piece.
    add_rule(r, {"aten.unbind.int"}, s);
  }
  // (Real, imag) pairs as complex elements and back: a view; the other dims map one to one.
  add_rule(r, {"aten.view_as_complex.default"}, mapped_rule(view_as_complex_map));
  add_rule(r, {"aten.view_as_real.default"}, mapped_rule(view_as_real_map));
  // Reversal along `dims` (a copy, not a view): other dims keep their shards.
  add_rule(r, {"aten.flip.default"}, mapped_rule(flip_map, false));
  // Tiling (a copy): dims repeated once keep their shards.
  add_rule(r, {"aten.repeat.default"}, mapped_rule(repeat_map, false));
  // Lower/upper triangle of the last two dims: batch dims keep their shards.
  add_rule(r,
           {"aten.tril.default",
            "aten.triu.default"}, mapped_rule(triangle_map, false));
  // Strided views of storage: sharded only as a reshape (see strided_rule), else R/Partial.
  add_rule(r,
           {"aten.as_strided.default",
            "aten.as_strided_scatter.default"}, strided_rule());
  // Padding: unpadded dims shard; see constant_pad_rule for the Partial kinds.
  add_rule(r, {"aten.constant_pad_nd.default"}, constant_pad_rule());
}

}  // namespace tlm::strategies
