#include "core/tensor_meta.h"

#include "core/placement.h"

namespace tlm {

namespace {
struct DTypeName {
  DType dtype;
  const char* name;
  const char* alias;
  int64_t bytes;
};
constexpr DTypeName kDTypes[] = {
    {DType::Float64, "float64", "double", 8},       {DType::Float32, "float32", "float", 4},
    {DType::Float16, "float16", "half", 2},         {DType::BFloat16, "bfloat16", "bf16", 2},
    {DType::Float8E4M3, "float8_e4m3fn", "fp8", 1}, {DType::Float8E5M2, "float8_e5m2", "fp8e5", 1},
    {DType::Int64, "int64", "long", 8},             {DType::Int32, "int32", "int", 4},
    {DType::Int16, "int16", "short", 2},            {DType::Int8, "int8", "char", 1},
    {DType::UInt8, "uint8", "byte", 1},             {DType::Bool, "bool", "bool", 1},
    {DType::Complex64, "complex64", "cfloat", 8},   {DType::Complex128, "complex128", "cdouble", 16},
};
}  // namespace

DType parse_dtype(const std::string& raw) {
  std::string s = raw.rfind("torch.", 0) == 0 ? raw.substr(6) : raw;
  for (const auto& d : kDTypes)
    if (s == d.name || s == d.alias) return d.dtype;
  std::string known;
  for (const auto& d : kDTypes) known += std::string(known.empty() ? "" : ", ") + d.name;
  throw InvalidArgument("unknown dtype '" + raw + "' (expected one of: " + known + ")");
}

const char* to_string(DType dt) {
  for (const auto& d : kDTypes)
    if (d.dtype == dt) return d.name;
  return "?";
}

int64_t element_size(DType dt) {
  for (const auto& d : kDTypes)
    if (d.dtype == dt) return d.bytes;
  return 4;
}

void check_shape(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t numel = 1;
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      throw InvalidArgument(what + ": negative size " + std::to_string(shape[d]) + " at dim " + std::to_string(d));
    if (shape[d] == 0) empty = true;
    if (shape[d] > kMaxNumel) throw InvalidArgument(what + ": size " + std::to_string(shape[d]) + " at dim " +
                                                    std::to_string(d) + " exceeds 2^53 elements");
    if (!empty && shape[d] > 0 && numel > kMaxNumel / shape[d])
      throw InvalidArgument(what + ": shape has more than 2^53 elements");
    if (!empty) numel *= shape[d];
  }
}

bool is_complex(DType d) { return d == DType::Complex64 || d == DType::Complex128; }

bool is_floating(DType d) {
  switch (d) {
    case DType::Float64: case DType::Float32: case DType::Float16: case DType::BFloat16:
    case DType::Float8E4M3: case DType::Float8E5M2: case DType::Complex64: case DType::Complex128:
      return true;
    default:
      return false;
  }
}

}  // namespace tlm
