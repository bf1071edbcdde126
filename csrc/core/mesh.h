// An N-D device mesh: only its shape and dim names matter to the planner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/placement.h"

namespace tlm {

struct Mesh {
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;  // empty or one per dim

  size_t ndim() const { return shape.size(); }
  int64_t size() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
  // Row-major rank <-> coordinate, as torch's DeviceMesh lays out ranks.
  std::vector<int64_t> coordinate(int64_t rank) const;
  int64_t rank(const std::vector<int64_t>& coord) const;
  std::string to_string() const;  // "2x2(dp,tp)"
};

// Throws InvalidArgument for empty meshes, non-positive sizes, name count
// mismatches or duplicate names.
Mesh make_mesh(std::vector<int64_t> shape, std::vector<std::string> dim_names = {});

}  // namespace tlm
