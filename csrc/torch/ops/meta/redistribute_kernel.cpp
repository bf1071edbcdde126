// Meta (and so fake-tensor) kernel of localmap::redistribute: the local output
// shape at this rank's coordinate, from core's layout arithmetic.
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "torch/ops/placement_args.h"

namespace tlm::ops {
namespace {

at::Tensor redistribute_meta(const at::Tensor& x, at::IntArrayRef global_shape, std::string_view src,
                             std::string_view dst, at::IntArrayRef mesh_shape, at::IntArrayRef coordinate,
                             const std::vector<std::string>& group_names,
                             std::optional<std::string_view> grad_placements) {
  const RedistributeCall call = check_redistribute(x, global_shape, src, dst, mesh_shape, coordinate,
                                                   group_names.size(), grad_placements);
  return at::empty(call.out_shape, x.options());
}

}  // namespace

TORCH_LIBRARY_IMPL(localmap, Meta, m) {
  m.impl("redistribute", TORCH_FN(redistribute_meta));
}

}  // namespace tlm::ops
