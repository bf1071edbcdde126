// Advanced indexing with index tensors: index.Tensor (x[idx0, idx1, ...]),
// index_put (x[idx...] = values, or += with accumulate), and histc.
//
// index.Tensor(self, indices): the k leading dims of self are indexed by k index
// tensors (broadcast together to shape B); the output is B followed by self's
// remaining dims. Shardable: a remaining dim of self (output dim |B| + offset),
// or a dim of B that every index tensor has in full (self replicated); linear in
// self. index_put(self, indices, values, accumulate): self's remaining dims shard
// alike in values (values = B followed by them); linear in (self, values) jointly.
// histc counts: any shard of the input gives Partial(sum) counts.
// Index lists with gaps (None entries) get only the replicated and Partial rows.
#include "core/strategies/indexing_rule.h"
#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

// The index tensors of an index/index_put node: their tensor-input positions,
// or empty when the list has gaps (None) or is not a leading block.
std::vector<int> leading_index_inputs(const RuleCtx& c) {
  std::vector<int> out = c.tensor_list("indices");
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] != static_cast<int>(i) + 1) return {};  // a gap (None): not a leading block after self
  return out;
}

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

void index_rows(const RuleCtx& c, DimRows& rows) {
  const std::vector<int> idx = leading_index_inputs(c);
  const int width = rows.width();
  const int out = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(width));
  if (!idx.empty()) {
    const auto& self = c.in(0).shape;
    const std::vector<int64_t> b = broadcast_shape(c, idx);
    const int nb = static_cast<int>(b.size());
    // A remaining dim of self.
    for (size_t d = idx.size(); d < self.size(); ++d) {
      std::fill(row.begin(), row.end(), R());
      row[0] = S(static_cast<int>(d));
      row[out] = S(nb + static_cast<int>(d - idx.size()));
      rows.add(row);
    }
    // A broadcast dim every index tensor has in full.
    for (int j = 0; j < nb; ++j) {
      std::fill(row.begin(), row.end(), R());
      bool ok = b[j] > 1;
      for (int k : idx) {
        const auto& s = c.in(k).shape;
        const int i = j - (nb - static_cast<int>(s.size()));
        if (i < 0 || s[i] != b[j]) ok = false;
        else row[k] = S(i);
      }
      row[out] = S(j);
      if (ok) rows.add(row);
    }
  }
  add_partial_rows(c, rows, {{{0}}});  // a gather is linear in self
}

void index_put_rows(const RuleCtx& c, DimRows& rows) {
  const std::vector<int> idx = leading_index_inputs(c);
  const int values = c.tensor("values");
  const int width = rows.width();
  const int out = c.num_inputs();
  std::vector<Placement> row(static_cast<size_t>(width));
  if (!idx.empty() && values >= 0) {
    const auto& self = c.in(0).shape;
    const auto& vs = c.in(values).shape;
    for (size_t d = idx.size(); d < self.size(); ++d) {
      // values broadcast against self[indices], aligned from the right
      const int vd = static_cast<int>(vs.size()) - static_cast<int>(self.size() - d);
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
  // x[idx0, idx1, ...] with index tensors for leading dims: a gather.
  add_rule(r, {"aten.index.Tensor"}, make(index_rows));
  // x[idx...] = values (accumulate: +=): a scatter into self.
  add_rule(r, {"aten.index_put.default"}, make(index_put_rows));
  // Histogram counts: counts of the pieces add up.
  add_rule(r, {"aten.histc.default"}, make(histc_rows));
}

}  // namespace tlm::strategies
