#include "core/solver/min_plus.h"

#include <algorithm>
#include <limits>
#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TLM_MIN_PLUS_X86 1
#include <immintrin.h>
#endif

namespace tlm::solver {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Portable scalar loops: the tails of the SIMD ones, and the whole on other CPUs.
inline double row_scalar(const double* row, const double* add, int c, int n, double m) {
  for (; c < n; ++c) m = std::min(m, row[c] + add[c]);
  return m;
}

inline void col_scalar(const double* krow, double a, int c, int n, double* out) {
  for (; c < n; ++c) out[c] = std::min(out[c], krow[c] + a);
}

struct Kernels {
  void (*rows)(const double*, int, int, const double*, double*);
  void (*cols)(const double*, int, int, const double*, double*);
  double (*one)(const double*, const double*, int);
  const char* isa;
};

// A block from one instruction set's kernel for a line: `Row` gives one row's minimum,
// `Col` takes one row into the columns' minima.
template <double (*Row)(const double*, const double*, int)>
void rows_with(const double* k, int rows, int cols, const double* add, double* out) {
  for (int r = 0; r < rows; ++r) out[r] = Row(k + static_cast<size_t>(r) * cols, add, cols);
}

template <void (*Col)(const double*, double, int, double*)>
void cols_with(const double* k, int rows, int cols, const double* add, double* out) {
  std::fill_n(out, cols, kInf);
  for (int r = 0; r < rows; ++r)
    if (add[r] != kInf) Col(k + static_cast<size_t>(r) * cols, add[r], cols, out);
}

#ifdef TLM_MIN_PLUS_X86

// min(acc, x) keeping acc's lane where they are equal; never NaN here.
double row_sse2(const double* row, const double* add, int n) {
  __m128d a0 = _mm_set1_pd(kInf), a1 = a0, a2 = a0, a3 = a0;
  int c = 0;
  for (; c + 8 <= n; c += 8) {  // four independent chains: min's latency, not its throughput
    a0 = _mm_min_pd(_mm_add_pd(_mm_loadu_pd(row + c), _mm_loadu_pd(add + c)), a0);
    a1 = _mm_min_pd(_mm_add_pd(_mm_loadu_pd(row + c + 2), _mm_loadu_pd(add + c + 2)), a1);
    a2 = _mm_min_pd(_mm_add_pd(_mm_loadu_pd(row + c + 4), _mm_loadu_pd(add + c + 4)), a2);
    a3 = _mm_min_pd(_mm_add_pd(_mm_loadu_pd(row + c + 6), _mm_loadu_pd(add + c + 6)), a3);
  }
  for (; c + 2 <= n; c += 2) a0 = _mm_min_pd(_mm_add_pd(_mm_loadu_pd(row + c), _mm_loadu_pd(add + c)), a0);
  a0 = _mm_min_pd(_mm_min_pd(a0, a1), _mm_min_pd(a2, a3));
  a0 = _mm_min_sd(a0, _mm_unpackhi_pd(a0, a0));
  return row_scalar(row, add, c, n, _mm_cvtsd_f64(a0));
}

void col_sse2(const double* krow, double a, int n, double* out) {
  const __m128d av = _mm_set1_pd(a);
  int c = 0;
  for (; c + 2 <= n; c += 2)
    _mm_storeu_pd(out + c, _mm_min_pd(_mm_add_pd(_mm_loadu_pd(krow + c), av), _mm_loadu_pd(out + c)));
  col_scalar(krow, a, c, n, out);
}

__attribute__((target("avx"))) double row_avx(const double* row, const double* add, int n) {
  __m256d a0 = _mm256_set1_pd(kInf), a1 = a0, a2 = a0, a3 = a0;
  int c = 0;
  for (; c + 16 <= n; c += 16) {
    a0 = _mm256_min_pd(_mm256_add_pd(_mm256_loadu_pd(row + c), _mm256_loadu_pd(add + c)), a0);
    a1 = _mm256_min_pd(_mm256_add_pd(_mm256_loadu_pd(row + c + 4), _mm256_loadu_pd(add + c + 4)), a1);
    a2 = _mm256_min_pd(_mm256_add_pd(_mm256_loadu_pd(row + c + 8), _mm256_loadu_pd(add + c + 8)), a2);
    a3 = _mm256_min_pd(_mm256_add_pd(_mm256_loadu_pd(row + c + 12), _mm256_loadu_pd(add + c + 12)), a3);
  }
  for (; c + 4 <= n; c += 4)
    a0 = _mm256_min_pd(_mm256_add_pd(_mm256_loadu_pd(row + c), _mm256_loadu_pd(add + c)), a0);
  a0 = _mm256_min_pd(_mm256_min_pd(a0, a1), _mm256_min_pd(a2, a3));
  __m128d h = _mm_min_pd(_mm256_castpd256_pd128(a0), _mm256_extractf128_pd(a0, 1));
  h = _mm_min_sd(h, _mm_unpackhi_pd(h, h));
  return row_scalar(row, add, c, n, _mm_cvtsd_f64(h));
}

__attribute__((target("avx"))) void col_avx(const double* krow, double a, int n, double* out) {
  const __m256d av = _mm256_set1_pd(a);
  int c = 0;
  for (; c + 4 <= n; c += 4)
    _mm256_storeu_pd(out + c, _mm256_min_pd(_mm256_add_pd(_mm256_loadu_pd(krow + c), av), _mm256_loadu_pd(out + c)));
  col_scalar(krow, a, c, n, out);
}

const Kernels kAvx{rows_with<row_avx>, cols_with<col_avx>, row_avx, "avx"};
const Kernels kSse2{rows_with<row_sse2>, cols_with<col_sse2>, row_sse2, "sse2"};

// AVX (256-bit doubles) where the CPU and the OS (saved ymm state) have it;
// __builtin_cpu_supports checks both.
bool supported(const Kernels& k) { return &k != &kAvx || __builtin_cpu_supports("avx"); }

const Kernels*& chosen() {
  static const Kernels* k = supported(kAvx) ? &kAvx : &kSse2;
  return k;
}

const Kernels& kernels() { return *chosen(); }

bool choose(const std::string& isa) {
  for (const Kernels* k : {&kAvx, &kSse2})
    if (isa == k->isa && supported(*k)) return chosen() = k, true;
  return false;
}

#else  // not x86-64: the plain loops

double row_plain(const double* row, const double* add, int n) { return row_scalar(row, add, 0, n, kInf); }

void col_plain(const double* krow, double a, int n, double* out) { col_scalar(krow, a, 0, n, out); }

const Kernels kPlain{rows_with<row_plain>, cols_with<col_plain>, row_plain, "scalar"};

const Kernels& kernels() { return kPlain; }

bool choose(const std::string& isa) { return isa == kPlain.isa; }

#endif

}  // namespace

void row_min_plus(const double* k, int rows, int cols, const double* add, double* out) {
  kernels().rows(k, rows, cols, add, out);
}

void col_min_plus(const double* k, int rows, int cols, const double* add, double* out) {
  kernels().cols(k, rows, cols, add, out);
}

double min_plus(const double* row, const double* add, int n) { return kernels().one(row, add, n); }

const char* min_plus_isa() { return kernels().isa; }

bool use_min_plus_isa(const std::string& isa) { return choose(isa); }

}  // namespace tlm::solver
