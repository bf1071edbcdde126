// The HiGHS C API, loaded at run time with dlopen.
//
// Where the library comes from: the `highspy` wheel (pinned >=1.7,<1.16 in
// pyproject.toml). Its file layout changes between releases (1.7-1.14 export
// the C API from the extension module `_core*.so`, 1.15 ships `libhighs.so.1`,
// 1.16 exports no C API at all), so we never rely on one file name: given a
// directory, every shared object in it is tried and the first one that
// exports the C API (`Highs_create` and the functions below) is used. A file
// path, or the TLM_HIGHS_LIBRARY environment variable (which wins over the
// path set by Python), selects one library explicitly. The prototypes are
// declared here because the wheel ships no headers; they are those of HiGHS
// 1.7-1.15 (checked with `nm -D` on each wheel). No link-time dependency:
// csrc/core stays dependency-free and reports HiGHS as unavailable, with the
// reason, when no library qualifies.
#pragma once

#include <cstdint>
#include <string>

namespace tlm::solver {

using HighsInt = int32_t;  // checked against Highs_getSizeofHighsInt() at load

struct HighsApi {
  void* (*create)();
  void (*destroy)(void*);
  HighsInt (*passMip)(void*, HighsInt num_col, HighsInt num_row, HighsInt num_nz, HighsInt a_format, HighsInt sense,
                      double offset, const double* col_cost, const double* col_lower, const double* col_upper,
                      const double* row_lower, const double* row_upper, const HighsInt* a_start,
                      const HighsInt* a_index, const double* a_value, const HighsInt* integrality);
  HighsInt (*setBoolOptionValue)(void*, const char*, HighsInt);
  HighsInt (*setIntOptionValue)(void*, const char*, HighsInt);
  HighsInt (*setDoubleOptionValue)(void*, const char*, double);
  HighsInt (*setStringOptionValue)(void*, const char*, const char*);
  HighsInt (*setSolution)(void*, const double* col_value, const double* row_value, const double* col_dual,
                          const double* row_dual);
  HighsInt (*run)(void*);
  HighsInt (*getModelStatus)(const void*);
  HighsInt (*getSolution)(const void*, double* col_value, double* col_dual, double* row_value, double* row_dual);
  HighsInt (*getDoubleInfoValue)(const void*, const char*, double*);
  HighsInt (*getIntInfoValue)(const void*, const char*, HighsInt*);
  double (*getObjectiveValue)(const void*);
  using Callback = void (*)(int type, const char* message, const void* data_out, void* data_in, void* user);
  HighsInt (*setCallback)(void*, Callback, void* user);
  HighsInt (*startCallback)(void*, HighsInt type);
  const void* (*getCallbackDataOutItem)(const void* data_out, const char* name);
};

// Constants of the C API used here.
constexpr HighsInt kHighsMatrixRowwise = 2;
constexpr HighsInt kHighsMinimize = 1;
constexpr HighsInt kHighsInteger = 1;
constexpr HighsInt kHighsModelOptimal = 7;
constexpr HighsInt kHighsModelInfeasible = 8;
constexpr int kHighsCallbackSimplexInterrupt = 1;
constexpr int kHighsCallbackIpmInterrupt = 2;
constexpr int kHighsCallbackMipImprovingSolution = 4;
constexpr int kHighsCallbackMipInterrupt = 6;

// A shared library file, or a directory whose shared objects are searched for
// the C API. Ignored once a library is loaded, and when TLM_HIGHS_LIBRARY is set.
void set_highs_library(const std::string& path);
// The loaded API, or nullptr (then `why` says what failed).
const HighsApi* highs_api(std::string* why = nullptr);

// What was loaded, for version reports: the file and HiGHS' own version
// string (Highs_version), or the reason nothing was.
struct HighsStatus {
  bool loaded = false;
  std::string path;
  std::string version;
  std::string why;
};
HighsStatus highs_status();

// The one sentence every user-facing report prints when the MILP phases are off.
constexpr const char* kHighsUnavailable = "HiGHS unavailable: MILP phases off";

}  // namespace tlm::solver
