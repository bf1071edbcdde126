// Fuzzer for the problem and solution readers (built under AddressSanitizer
// and UBSan by test/cpp/cmake/solver_fuzz.cmake; `make test-fuzz`).
//
// Feeds random valid documents, byte-level and structure-aware mutations of
// them (fuzz_mutate.h: deep nesting, extreme numbers, surrogates) and random
// text to read_problem / read_solution, and evaluates whatever parses with
// random (often out-of-range) solutions. Any exception other than
// std::invalid_argument, or any sanitizer report, is a failure.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

#include "core/solver/problem_io.h"
#include "fuzz_mutate.h"
#include "solver_test_util.h"

using namespace tlm::solver;

namespace {

void exercise(const std::string& text, std::mt19937_64& rng) {
  tlm::fuzz::current_input() = text;
  try {
    Problem p = read_problem(text);
    for (int k = 0; k < 3; ++k) {
      Solution x(p.nodes.size() + (rng() % 5 == 0 ? 1 : 0));
      for (auto& v : x) v = static_cast<int>(rng() % 6) - 1;
      evaluate(p, x);
    }
    read_problem(write_problem(p));
  } catch (const std::invalid_argument&) {
  }
  try {
    read_solution(text);
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 60.0;
  std::mt19937_64 rng(argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  tlm::fuzz::watch_inputs("solver_fuzz_failure.json");
  const auto t0 = std::chrono::steady_clock::now();
  long runs = 0;
  try {
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
      std::string doc = write_problem(testing::random_problem(rng));
      if (rng() % 4 == 0) doc = doc.substr(std::string("{\"problem\":").size(), doc.size() - 12);  // bare form
      exercise(doc, rng);
      for (int k = 0; k < 10; ++k) exercise(tlm::fuzz::mutate_bytes(doc, rng), rng);
      for (int k = 0; k < 10; ++k) exercise(tlm::fuzz::mutate_structure(doc, rng), rng);
      std::string noise(rng() % 64, ' ');
      for (auto& c : noise) c = static_cast<char>(rng() & 0xFF);
      exercise(noise, rng);
      runs += 22;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "solver_fuzz: unexpected exception after %ld inputs: %s\n", runs, e.what());
    tlm::fuzz::save_input();
    return 1;
  }
  std::printf("solver_fuzz: %ld inputs, no crash\n", runs);
  return 0;
}
