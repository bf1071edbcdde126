#include "core/mesh.h"

#include <set>

namespace tlm {

namespace {
constexpr int64_t kMaxMeshSize = 2147483647;  // torch's world size is a 32-bit int

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}
}  // namespace

Mesh make_mesh(std::vector<int64_t> shape, std::vector<std::string> dim_names) {
  if (shape.empty()) throw InvalidArgument("mesh shape must have at least one dim");
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] <= 0)
      throw InvalidArgument("mesh shape has size " + std::to_string(shape[i]) + " at dim " + std::to_string(i) +
                            " (expected every size >= 1)");
  int64_t ranks = 1;
  for (int64_t s : shape) {
    if (s > kMaxMeshSize / ranks)
      throw InvalidArgument("mesh shape " + shape_string(shape) + " has more than 2^31 - 1 devices (torch ranks are "
                            "32-bit integers)");
    ranks *= s;
  }
  if (!dim_names.empty()) {
    if (dim_names.size() != shape.size())
      throw InvalidArgument("mesh has " + std::to_string(shape.size()) + " dims but " +
                            std::to_string(dim_names.size()) + " dim names");
    std::set<std::string> seen(dim_names.begin(), dim_names.end());
    if (seen.size() != dim_names.size()) throw InvalidArgument("mesh dim names must be distinct");
  }
  return Mesh{std::move(shape), std::move(dim_names)};
}

std::vector<int64_t> Mesh::coordinate(int64_t r) const {
  if (r < 0 || r >= size())
    throw InvalidArgument("rank " + std::to_string(r) + " is outside a mesh of size " + std::to_string(size()));
  std::vector<int64_t> c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = r % shape[i];
    r /= shape[i];
  }
  return c;
}

int64_t Mesh::rank(const std::vector<int64_t>& coord) const {
  int64_t r = 0;
  for (size_t i = 0; i < shape.size(); ++i) r = r * shape[i] + coord[i];
  return r;
}

std::string Mesh::to_string() const {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  if (!dim_names.empty()) {
    s += "(";
    for (size_t i = 0; i < dim_names.size(); ++i) s += (i ? "," : "") + dim_names[i];
    s += ")";
  }
  return s;
}

}  // namespace tlm
