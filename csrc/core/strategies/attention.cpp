// Scaled dot-product attention forward/backward (CPU flash, CUDA flash and
// efficient, math).
//
// Batch and head dims are independent attention problems: shard them in
// every tensor that has them (query/key/value/output/logsumexp/masks and their
// gradients); scalars such as RNG seeds stay replicated. Heads are only
// sharded when query and key/value have the same head count (grouped-query
// layouts would pair different heads on a rank).
// Query-sequence sharding (key/value replicated) is exact when attention is
// not causal -- a causal mask is aligned to the local query block, not to its
// global offset -- and is offered for the CPU flash op, whose logsumexp has
// one entry per query. In its backward the key/value gradients become
// Partial(sum). The backward is linear in grad_out (everything else fixed).
// Nothing is sharded under dropout: each rank would draw its own mask.
#include "core/strategies/rule.h"
#include "core/strategies/shard_math.h"

#include <algorithm>
#include <optional>

namespace tlm::strategies {

namespace {

struct AttnLayout {
  int q = 0, k = 1, v = 2;  // tensor-input indices
  int grad_out = -1;        // backward only
  int mask = -1;            // tensor-input index of attn_mask / attn_bias
  bool cpu_flash = false;
};

const TensorMeta& meta_of(const RuleCtx& c, int t) { return t < c.num_inputs() ? c.in(t) : c.out(t - c.num_inputs()); }

void attention_rows(const RuleCtx& c, DimRows& rows, const AttnLayout& a, bool backward) {
  if (c.scalar("dropout_p") != 0.0) return;
  const auto& q = c.in(a.q).shape;
  const auto& k = c.in(a.k).shape;
  const auto& v = c.in(a.v).shape;
  if (q.size() < 3 || k.size() != q.size() || v.size() != q.size()) return;
  const int nd = static_cast<int>(q.size());
  const int width = rows.width();
  std::vector<Placement> row(static_cast<size_t>(width));
  for (int d = 0; d < nd - 2; ++d) {  // batch-like dims
    if (k[d] != q[d] || v[d] != q[d]) continue;
    for (int t = 0; t < width; ++t) {
      const auto& m = meta_of(c, t);
      if (t == a.mask) {  // broadcast mask: aligned from the right against (..., L, S)
        const int i = d - (nd - static_cast<int>(m.ndim()));
        row[t] = (i >= 0 && m.shape[i] == q[d]) ? S(i) : R();
      } else {
        row[t] = (m.ndim() >= 3 && m.ndim() > d && m.shape[d] == q[d]) ? S(d) : R();
      }
    }
    rows.add(row);
  }
  const bool causal = c.flag("is_causal");
  if (a.cpu_flash && !causal) {
    const int L = nd - 2;
    const int n_in = c.num_inputs();
    for (int t = 0; t < width; ++t) {
      const auto& m = meta_of(c, t);
      if (t == a.k || t == a.v) {
        row[t] = R();
      } else if (t == a.mask) {
        row[t] = (m.ndim() >= 2 && m.shape[m.ndim() - 2] == q[L]) ? S(static_cast<int>(m.ndim()) - 2) : R();
      } else if (backward && t >= n_in && t - n_in != 0) {
        row[t] = P();  // grad_key, grad_value: sums over the query blocks
      } else {
        row[t] = (m.ndim() > L && m.shape[L] == q[L]) ? S(L) : R();
      }
    }
    rows.add(row);
  }
  // Linear in the incoming gradient.
  if (backward && a.grad_out >= 0) add_partial_rows(c, rows, {{{a.grad_out}}});
}

Rule attention_rule(std::function<AttnLayout(const RuleCtx&)> layout, bool backward) {
  Rule r;
  r.family = "attention";
  r.dims = [=](const RuleCtx& c, DimRows& rows) { attention_rows(c, rows, layout(c), backward); };
  // The fused kernels divide work by the local sizes (the CPU flash kernel raises SIGFPE on
  // zero heads), so no rank may hold an empty piece.
  r.valid = no_empty_local_input;
  // 2 matmuls of (L x E) @ (E x S) forward; the backward recomputes the
  // scores and runs 4 more (2.5x the forward's matmul work).
  r.work = [=](const RuleCtx& c, const OpStrategy& s) {
    const AttnLayout a = layout(c);
    auto q = local_shape_in(c, s, a.q);
    auto k = local_shape_in(c, s, a.k);
    auto v = local_shape_in(c, s, a.v);
    double batch = 1;
    for (size_t i = 0; i + 2 < q.size(); ++i) batch *= static_cast<double>(q[i]);
    const double L = static_cast<double>(q[q.size() - 2]), E = static_cast<double>(q.back());
    const double S_ = static_cast<double>(k[k.size() - 2]), Ev = static_cast<double>(v.back());
    double fwd = 2.0 * batch * L * S_ * (E + Ev);
    OpWork w;
    if (c.flag("is_causal")) {
      fwd *= 0.5;
      w.causal_keys = S_;
    }
    w.flops = backward ? 2.5 * fwd : fwd;
    w.bytes = io_bytes(c, s);
    w.head_dim = E;
    return w;
  };
  return r;
}

// ---- flex_attention (torch's higher-order op) -------------------------------------------
// Its arguments: query, key, value (B, H, L|S, E), score_mod (a subgraph), block_mask (a
// tuple: sequence lengths, the block tensors (B|1, H|1, ...), block sizes, the mask_mod
// subgraph), scale, kernel_options, then the score_mod and mask_mod buffers. The backward
// op takes query, key, value, out, logsumexp, grad_out, grad_logsumexp, the score_mod
// forward and joint subgraphs, then the same block_mask and buffers.
//
// Batch and head are independent problems as for SDPA, with two provisos. The subgraphs
// are evaluated with the rank's *local* batch and head indices, so a dim is sharded only
// where no subgraph reads its index (the exporter records which placeholders each subgraph
// reads, extra.subgraph_reads); an ALiBi score_mod reading the head keeps heads whole. The
// block tensors follow the batch / head dim where they have it, and are replicated where it
// is a broadcast 1; the subgraph buffers stay replicated (no index that could address a
// shard of them is local), but for the case below.
//
// A subgraph's buffer (a tensor a mask_mod closure captured, e.g. document ids) may be
// sharded with the dim after all: where the subgraph reads the index only to index that
// buffer at one dim, and the buffer only with it there (`ids[b, q_idx]`; the exporter
// records such reads, extra.subgraph_index_buffers), the buffer sharded on that dim as
// the dim itself has every local index reading the same value as the global one.
struct FlexSubgraph {
  const char* name;     // the subgraph argument
  int b_at;             // its placeholder of index b; h is the next
  const char* buffers;  // the argument holding the tuple of buffers it takes
  int first_buffer_at;  // its placeholder of the first buffer
};

// The block_mask tuple (its last item the mask_mod subgraph) and mask_mod's buffers
// (mask_mod_other_buffers) are named alike in both ops.
struct FlexLayout {
  std::vector<const char*> qkv_like;    // tensors shaped (B, H, L[, E]) as the query (None allowed)
  std::vector<FlexSubgraph> subgraphs;  // score_mod (forward; backward: fw and joint graph)
  bool buffer_grads;                    // outputs past the third are the buffers' gradients (backward)
};

// The buffers (tensor inputs, each with the dim it is sharded on) that subgraph `sub`'s
// index placeholder `k` addresses, when that is the only way it reads it; nullopt when
// it reads k otherwise (or unknown). An index it does not read addresses nothing.
std::optional<std::vector<std::pair<int, int>>> indexed_buffers(const RuleCtx& c, const std::string& sub, int k,
                                                                const char* buffers, int first_buffer_at) {
  if (!c.subgraph_may_read(sub, k)) return std::vector<std::pair<int, int>>{};
  const auto pairs = c.subgraph_index_buffers(sub, k);
  if (!pairs || !c.list_size(buffers)) return std::nullopt;
  const std::vector<int> tensors = c.tensor_list(buffers);
  std::vector<std::pair<int, int>> out;
  for (const auto& [placeholder, dim] : *pairs) {
    const int64_t e = placeholder - first_buffer_at;
    if (e < 0 || static_cast<size_t>(e) >= tensors.size() || tensors[static_cast<size_t>(e)] < 0) return std::nullopt;
    out.emplace_back(tensors[static_cast<size_t>(e)], static_cast<int>(dim));
  }
  return out;
}

void flex_rows(const RuleCtx& c, DimRows& rows, const FlexLayout& f) {
  const auto n_bm_items = c.list_size("block_mask");
  if (!n_bm_items) return;
  const auto& q = c.in(0).shape;
  if (q.size() != 4) return;
  // Tensor inputs come in argument order: the query-like tensors (an absent gradient
  // is None), the block_mask's tensors, then the buffers.
  std::vector<int> qkv_like;
  for (const char* name : f.qkv_like)
    if (const int t = c.tensor(name); t >= 0) qkv_like.push_back(t);
  const auto [first_bm, n_bm] = c.tensor_range("block_mask");
  const bool has_buffer_grads = f.buffer_grads && c.num_outputs() > 3;
  for (int d : {0, 1}) {  // batch, heads
    // Buffers a subgraph indexes with this dim's index, sharded on the dim they are indexed at.
    auto sharded = *n_bm_items == 0 ? std::optional<std::vector<std::pair<int, int>>>(std::in_place)
                                    : indexed_buffers(c, c.subgraph_item("block_mask", *n_bm_items - 1), d,
                                                      "mask_mod_other_buffers", 4);  // mask_mod(b, h, q, kv, ...)
    for (const auto& s : f.subgraphs) {
      if (!sharded) break;
      auto more = indexed_buffers(c, c.subgraph(s.name), s.b_at + d, s.buffers, s.first_buffer_at);
      if (more) sharded->insert(sharded->end(), more->begin(), more->end());
      else sharded.reset();
    }
    // A sharded buffer's gradient would be a piece of it; the rule does not place those.
    if (!sharded || (has_buffer_grads && !sharded->empty())) continue;
    // Each buffer as long as the dim where it is indexed, and at one dim only.
    bool fits = true;
    for (const auto& [t, dim] : *sharded) {
      fits = fits && dim >= 0 && dim < c.in(t).ndim() &&
             c.in(t).shape[static_cast<size_t>(dim)] == q[d];
      for (const auto& [t2, dim2] : *sharded) fits = fits && (t2 != t || dim2 == dim);
    }
    if (!fits) continue;
    bool same = true;
    for (int t : qkv_like) same = same && c.in(t).ndim() >= 3 && c.in(t).shape[d] == q[d];
    if (!same) continue;
    std::vector<Placement> row(static_cast<size_t>(rows.width()), R());
    for (int t : qkv_like) row[static_cast<size_t>(t)] = S(d);
    for (int t = first_bm; t < first_bm + n_bm; ++t)
      if (c.in(t).ndim() > d && c.in(t).shape[d] == q[d]) row[static_cast<size_t>(t)] = S(d);
    for (const auto& [t, dim] : *sharded) row[static_cast<size_t>(t)] = S(dim);
    for (int o = 0; o < c.num_outputs(); ++o)  // out (B, H, L, Ev), logsumexp / max (B, H, L); grads as inputs
      if (c.out(o).ndim() > d && c.out(o).shape[d] == q[d])
        row[static_cast<size_t>(c.num_inputs() + o)] = S(d);
    rows.add(row);
  }
}

Rule flex_rule(FlexLayout layout, bool backward) {
  Rule r;
  r.family = "attention";
  r.dims = [=](const RuleCtx& c, DimRows& rows) { flex_rows(c, rows, layout); };
  r.valid = no_empty_local_input;
  // As SDPA: QK^T and PV forward, the backward 2.5x that; the block mask skips the
  // masked-out blocks, which the estimate does not count.
  r.work = [=](const RuleCtx& c, const OpStrategy& s) {
    auto q = local_shape_in(c, s, 0);
    auto k = local_shape_in(c, s, 1);
    auto v = local_shape_in(c, s, 2);
    OpWork w;
    if (q.size() == 4 && k.size() == 4 && v.size() == 4) {
      const double fwd = 2.0 * static_cast<double>(q[0] * q[1]) * static_cast<double>(q[2]) *
                         static_cast<double>(k[2]) * static_cast<double>(q[3] + v[3]);
      w.flops = backward ? 2.5 * fwd : fwd;
      w.head_dim = static_cast<double>(q[3]);
    }
    w.bytes = io_bytes(c, s);
    return w;
  };
  return r;
}

}  // namespace

void register_attention(Registry& r) {
  // flex_attention(query, key, value, score_mod, block_mask, scale, kernel_options,
  //                score_mod_other_buffers, mask_mod_other_buffers) -> (out, logsumexp, max_scores)
  add_rule(r, {"higher_order.flex_attention"},
           flex_rule(FlexLayout{{"query", "key", "value"}, {{"score_mod", 1, "score_mod_other_buffers", 5}}, false},
                     false));
  // flex_attention_backward(query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph,
  //                         joint_graph, block_mask, ...) -> (grad_query, grad_key, grad_value, (buffer grads))
  add_rule(r, {"higher_order.flex_attention_backward"},
           flex_rule(FlexLayout{{"query", "key", "value", "out", "logsumexp", "grad_out", "grad_logsumexp"},
                                {{"fw_graph", 1, "score_mod_other_buffers", 5},
                                 {"joint_graph", 1, "score_mod_other_buffers", 6}},
                                true},
                     true));

  // (query, key, value, dropout_p, is_causal, *, attn_mask, scale) -> (output, logsumexp)
  add_rule(r, {"aten._scaled_dot_product_flash_attention_for_cpu.default"},
           attention_rule(
               [](const RuleCtx& c) {
                 AttnLayout a;
                 a.mask = c.tensor("attn_mask");
                 a.cpu_flash = true;
                 return a;
               },
               false));
  // (grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask, scale)
  add_rule(r, {"aten._scaled_dot_product_flash_attention_for_cpu_backward.default"},
           attention_rule(
               [](const RuleCtx& c) {
                 AttnLayout a{1, 2, 3, 0, c.tensor("attn_mask"), true};
                 return a;
               },
               true));
  // CUDA flash: (query, key, value, dropout_p, is_causal, return_debug_mask, *, scale)
  add_rule(r, {"aten._scaled_dot_product_flash_attention.default"},
           attention_rule([](const RuleCtx&) { return AttnLayout{}; }, false));
  // (grad_out, q, k, v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...)
  add_rule(r, {"aten._scaled_dot_product_flash_attention_backward.default"},
           attention_rule([](const RuleCtx&) { return AttnLayout{1, 2, 3, 0, -1, false}; }, true));
  // (query, key, value, attn_bias?, compute_log_sumexp, dropout_p, is_causal, *, scale)
  add_rule(r, {"aten._scaled_dot_product_efficient_attention.default"},
           attention_rule(
               [](const RuleCtx& c) { return AttnLayout{0, 1, 2, -1, c.tensor("attn_bias"), false}; },
               false));
  // (grad_out, q, k, v, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p, grad_input_mask,
  //  is_causal, *, scale)
  add_rule(r, {"aten._scaled_dot_product_efficient_attention_backward.default"},
           attention_rule([](const RuleCtx& c) { return AttnLayout{1, 2, 3, 0, c.tensor("attn_bias"), false}; },
                          true));
  // (query, key, value, attn_mask?, dropout_p, is_causal, dropout_mask?, *, scale, enable_gqa)
  add_rule(r, {"aten._scaled_dot_product_attention_math.default"},
           attention_rule(
               [](const RuleCtx& c) { return AttnLayout{0, 1, 2, -1, c.tensor("attn_mask"), false}; },
               false));
}

}  // namespace tlm::strategies
