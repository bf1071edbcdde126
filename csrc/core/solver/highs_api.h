// The HiGHS C API, loaded at run time with dlopen from the `highspy` wheel's
// libhighs.so (the wheel ships the library but no headers, so the few
// prototypes we need are declared here; they match HiGHS 1.7-1.15, checked
// against `nm -D libhighs.so.1` of highspy 1.15.1). No link-time dependency:
// csrc/core stays dependency-free and simply reports HiGHS as unavailable.
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
constexpr int kHighsCallbackMipImprovingSolution = 4;
constexpr int kHighsCallbackMipInterrupt = 6;

// A file (libhighs.so...) or a directory holding libhighs.so.1. Also read
// from the TLM_HIGHS_LIBRARY environment variable when never set.
void set_highs_library(const std::string& path);
// The loaded API, or nullptr (then `why` says what failed).
const HighsApi* highs_api(std::string* why = nullptr);

}  // namespace tlm::solver
