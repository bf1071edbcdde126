// Discrete Fourier transforms: _fft_c2c, _fft_r2c, _fft_c2r (torch.fft.* and their
// backwards lower to these three).
//
// A transform mixes every element along the dims it transforms, so those dims stay
// whole; every other dim is a batch of independent transforms and shards alike in the
// input and the output (their sizes agree there: only a transformed dim changes size,
// the last one of r2c/c2r). No Partial rows: the transforms are linear, but a Partial
// complex value would need complex reductions, which the collectives here do not take.
// No rank may hold an empty piece: torch's CPU transforms (MKL) fail on an empty batch.
#include <algorithm>
#include <cmath>

#include "core/strategies/rule.h"

namespace tlm::strategies {

namespace {

void untransformed_dim_rows(const RuleCtx& c, DimRows& rows) {
  const int nd = static_cast<int>(c.in(0).ndim());
  std::vector<int> transformed;
  for (int64_t d : c.int_list("dim")) transformed.push_back(wrap_dim(d, nd));
  const auto& is = c.in(0).shape;
  const auto& os = c.out(0).shape;
  if (static_cast<int>(os.size()) != nd) return;
  for (int d = 0; d < nd; ++d)
    if (std::find(transformed.begin(), transformed.end(), d) == transformed.end() && is[d] == os[d])
      rows.add({S(d), S(d)});
}

// A radix-2 transform of n points costs about 5 n log2(n) real flops (Cooley-Tukey, complex
// arithmetic); a multi-dim one the product of its dims' sizes as n. Counted on the larger
// of input and output, which a real transform halves on its last dim.
OpWork fft_work(const RuleCtx& c, const OpStrategy& s) {
  OpWork w = elementwise_work(c, s, 0.0);
  const int nd = static_cast<int>(c.in(0).ndim());
  double points = 1;
  for (int64_t d : c.int_list("dim")) {
    const int k = wrap_dim(d, nd);
    points *= static_cast<double>(std::max(c.in(0).shape[k], c.out(0).shape[k]));
  }
  const double elements = static_cast<double>(std::max(local_numel_in(c, s, 0), local_numel_out(c, s, 0)));
  w.flops = 5.0 * elements * std::log2(std::max(points, 2.0));
  return w;
}

}  // namespace

void register_fft(Registry& r) {
  // _fft_c2c(self, dim, normalization, forward), _fft_r2c(self, dim, normalization, onesided),
  // _fft_c2r(self, dim, normalization, last_dim_size): `dim` lists the transformed dims.
  Rule rule;
  rule.family = "fft";
  rule.dims = untransformed_dim_rows;
  rule.work = fft_work;
  rule.valid = no_empty_local_input;
  add_rule(r, {"aten._fft_c2c.default", "aten._fft_r2c.default", "aten._fft_c2r.default"}, rule);
}

}  // namespace tlm::strategies
