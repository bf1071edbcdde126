// Shape and dtype of one tensor value in the planner IR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tlm {

enum class DType : uint8_t {
  Float64, Float32, Float16, BFloat16, Float8E4M3, Float8E5M2,
  Int64, Int32, Int16, Int8, UInt8, Bool, Complex64, Complex128
};

// Accepts "float32", "torch.float32", "f32" style names; throws
// InvalidArgument naming the unknown dtype and listing the known ones.
DType parse_dtype(const std::string& name);
const char* to_string(DType d);  // "float32"
int64_t element_size(DType d);   // bytes
bool is_floating(DType d);
bool is_complex(DType d);

// Largest element count a tensor may have: shard arithmetic and the cost model
// add and multiply sizes freely, so counts stay far below int64's limit (2^53
// elements is also the largest count a double holds exactly).
constexpr int64_t kMaxNumel = int64_t{1} << 53;

// Throws InvalidArgument naming `what` for a negative size or a shape whose
// element count exceeds kMaxNumel (hostile or corrupt input).
void check_shape(const std::vector<int64_t>& shape, const std::string& what);

struct TensorMeta {
  std::vector<int64_t> shape;
  DType dtype = DType::Float32;

  int64_t ndim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
  int64_t nbytes() const { return numel() * element_size(dtype); }
};

}  // namespace tlm
