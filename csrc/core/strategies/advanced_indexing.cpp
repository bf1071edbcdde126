// Advanced indexing with index tensors: index.Tensor (x[idx0, idx1, ...]),
// index_put (x[idx...] = values, or += with accumulate), their unchecked forms
// (interpolate's), and histc.
//
// index.Tensor(self, indices): k dims of self are indexed by k index tensors
// (broadcast together to shape B; None entries take a dim whole); the output is
// torch's layout of B and self's other dims (IndexLayout). Shardable: a dim of self
// no index tensor reads (its result dim), or a dim of B that every index tensor has
// in full (self replicated); linear in self. index_put(self, indices, values,
// accumulate): self's unread dims shard alike in values (values broadcast against
// self[indices]); linear in (self, values) jointly.
// histc counts: any shard of the input gives Partial(sum) counts.
#include <algorithm>

#include "core/strategies/indexing_rule.h"
#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

// Where index/index_put's index tensors sit and where self's other dims go. The list may
// have gaps (None: that dim taken whole, as interpolate's `_unsafe_index(x, [None, None,
// h, w])`). As torch lays out the result: with the indexed dims adjacent, the broadcast
// index shape B replaces them in place; otherwise B comes first and the other dims follow.
struct IndexLayout {
  std::vector<int> inputs;   // the index tensors' tensor-input positions
  std::vector<int> of_self;  // per self dim: its result dim, or -1 where indexed
  int b_first = 0;           // the result dim of B's first dim
  std::vector<int64_t> b;    // B
  int result_ndim = 0;
};

std::vector<int64_t> broadcast_shape(const RuleCtx& c, const std::vector<int>& idx) {
  size_t nd = 0;
  for (int k : idx) nd = std::max(nd, c.in(k).shape.size());
  std::vector<int64_t> out(nd, 1);
  for (int k : idx) {
    const auto& s = c.in(k).shape;
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[nd - s.size() + i];
      if (s[i] != 1) o = s[i];
    }
  }
  return out;
}

// Empty `inputs` when there is nothing to lay out (no index tensor, or more entries than
// self has dims).
IndexLayout index_layout(const RuleCtx& c) {
  IndexLayout l;
  const std::vector<int> entries = c.tensor_list("indices");
  const int nd = static_cast<int>(c.in(0).ndim());
  if (static_cast<int>(entries.size()) > nd) return l;
  std::vector<int> indexed;
  for (size_t i = 0; i < entries.size(); ++i)
    if (entries[i] >= 0) indexed.push_back(static_cast<int>(i)), l.inputs.push_back(entries[i]);
  if (l.inputs.empty()) return l;
  l.b = broadcast_shape(c, l.inputs);
  const int nb = static_cast<int>(l.b.size());
  const bool adjacent = indexed.back() - indexed.front() + 1 == static_cast<int>(indexed.size());
  l.b_first = adjacent ? indexed.front() : 0;
  l.of_self.assign(static_cast<size_t>(nd), -1);
  int next = adjacent ? 0 : nb;
  for (int d = 0; d < nd; ++d) {
    if (std::find(indexed.begin(), indexed.end(), d) != indexed.end()) {
      if (adjacent && d == indexed.front()) next += nb;
      continue;
    }
    l.of_self[d] = next++;
  }
  l.result_ndim = next;
  return l;
}

void index_rows(const RuleCtx& c, DimRows& rows) {
  const IndexLayout l = index_layout(c);
  const int width = rows.width();
  const int out = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(width));
  // A dim of self that no index tensor reads.
  for (size_t d = 0; d < l.of_self.size(); ++d) {
    if (l.of_self[d] < 0) continue;
    std::fill(row.begin(), row.end(), R());
    row[0] = S(static_cast<int>(d));
    row[out] = S(l.of_self[d]);
    rows.add(row);
  }
  // A broadcast dim every index tensor has in full.
  const int nb = static_cast<int>(l.b.size());
  for (int j = 0; j < nb; ++j) {
    std::fill(row.begin(), row.end(), R());
    bool ok = l.b[j] > 1;
    for (int k : l.inputs) {
      const auto& s = c.in(k).shape;
      const int i = j - (nb - static_cast<int>(s.size()));
      if (i < 0 || s[i] != l.b[j]) ok = false;
      else row[k] = S(i);
    }
    row[out] = S(l.b_first + j);
    if (ok) rows.add(row);
  }
  add_partial_rows(c, rows, {{{0}}});  // a gather is linear in self
}

void index_put_rows(const RuleCtx& c, DimRows& rows) {
  const IndexLayout l = index_layout(c);
  const int values = c.tensor("values");
  const int width = rows.width();
  const int out = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(width));
  if (values >= 0) {
    const auto& self = c.in(0).shape;
    const auto& vs = c.in(values).shape;
    for (size_t d = 0; d < l.of_self.size(); ++d) {
      if (l.of_self[d] < 0) continue;
      // values broadcast against self[indices], aligned from the right
      const int vd = static_cast<int>(vs.size()) - (l.result_ndim - l.of_self[d]);
      if (vd < 0 || vs[vd] != self[d]) continue;
      std::fill(row.begin(), row.end(), R());
      row[0] = S(static_cast<int>(d));
      row[values] = S(vd);
      row[out] = S(static_cast<int>(d));
      rows.add(row);
    }
  }
  // Writing (or adding) values into self is linear in (self, values) together.
  if (values >= 0) add_partial_rows(c, rows, {{{0, values}}});
}

void histc_rows(const RuleCtx& c, DimRows& rows) {
  for (int d = 0; d < static_cast<int>(c.in(0).ndim()); ++d) rows.add({S(d), P()});
}

using indexing::make;

}  // namespace

void register_advanced_indexing(Registry& r) {
  // x[idx0, idx1, ...] with index tensors (interpolate's unchecked form alike): a gather.
  add_rule(r,
           {"aten._unsafe_index.Tensor",
            "aten.index.Tensor"}, make(index_rows));
  // x[idx...] = values (accumulate: +=; interpolate's backward the unchecked form): a scatter into self.
  add_rule(r,
           {"aten._unsafe_index_put.default",
            "aten.index_put.default"}, make(index_put_rows));
  // Histogram counts: counts of the pieces add up.
  add_rule(r, {"aten.histc.default"}, make(histc_rows));
}

}  // namespace tlm::strategies
