// The inner loops of message passing: minima of a small matrix plus a vector,
// along its rows or its columns, in SIMD.
//
// A pass of messages is these two loops over every edge's factored matrix
// (factored_costs.h), ~93 M entries a pass on Llama-3-405B's folded problem.
// Written as plain loops they ran scalar: a min-reduction over doubles is not
// vectorised without -ffast-math (NaN order), and the build targets baseline
// x86-64. Here they are SSE2 (every x86-64 CPU), or AVX where the CPU has it
// (chosen once, at run time). Min and a single addition are exact, so every
// path returns the same doubles in any order: plans do not depend on the CPU.
// No NaN may reach them (costs are finite or +inf; potentials are finite).
#pragma once

#include <string>

namespace tlm::solver {

// out[r] = min over c < cols of k[r * cols + c] + add[c], for every r < rows
// (+inf where every term is).
void row_min_plus(const double* k, int rows, int cols, const double* add, double* out);

// out[c] = min over r < rows of k[r * cols + c] + add[r], for every c < cols
// (out is overwritten; +inf where every term is).
void col_min_plus(const double* k, int rows, int cols, const double* add, double* out);

// One row: min over c < n of row[c] + add[c].
double min_plus(const double* row, const double* add, int n);

// The instruction set the kernels use on this CPU ("avx" or "sse2"), for traces.
const char* min_plus_isa();

// Makes the kernels use `isa` ("avx", "sse2"; "scalar" off x86-64) when this CPU has
// it, for tests of every path; false (nothing changed) otherwise. Not thread-safe: call
// it while no solve runs.
bool use_min_plus_isa(const std::string& isa);

}  // namespace tlm::solver
