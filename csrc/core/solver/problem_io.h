// Problem and solution files: the IOPDDL contest format, which is also ours
// plus optional fields (one reader for both):
//   {"problem": {"name": ..., "usage_limit": L,
//     "nodes": {"intervals": [[start, end), ...], "costs": [[...]], "usages": [[...]],
//               "pinned": [-1 | s, ...], "usage_lower": [null | u, ...], "usage_upper": [...]},
//     "edges": {"nodes": [[u, v], ...], "costs": [[row-major |S_u| x |S_v|], ...]},
//     "couplings": {"nodes": [[u, v], ...], "maps": [[s_v for each s_u, -1 = forbidden], ...]}}}
// The outer {"problem": ...} wrapper is optional. A forbidden cost is written
// as 9223372036854775807 (kInfiniteCost).
//
// The reader is a streaming parser written for this schema: contest files are
// up to ~150 MB of integers, which a generic DOM would hold in gigabytes.
// Errors are tlm::json::ParseError (syntax, with line and column) or
// tlm::json::SchemaError naming the field, e.g. "problem.edges.costs[12]".
#pragma once

#include <string>

#include "core/solver/problem.h"

namespace tlm::solver {

Problem read_problem(const std::string& text);
std::string write_problem(const Problem& problem);

// {"problem": name, "solution": [...], "cost": c} (+ extra fields given as raw JSON members).
std::string write_solution(const Problem& problem, const Solution& solution, const std::string& extra_members = "");
// Accepts a bare list of strategy indices or an object with a "solution" list.
Solution read_solution(const std::string& text);

}  // namespace tlm::solver
