// Developer trace of the solver's phases, printed to stderr when the
// environment variable TLM_SOLVER_TRACE is set (read once). Off by default:
// the library never writes to the console on its own.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace tlm::solver {

inline bool trace_on() {
  static const bool on = std::getenv("TLM_SOLVER_TRACE") != nullptr;
  return on;
}

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline void trace(const char* fmt, ...) {
  if (!trace_on()) return;
  static const auto t0 = std::chrono::steady_clock::now();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "[tlm %7.2fs] ", s);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

}  // namespace tlm::solver
