// Fuzzer for the problem and solution readers (built under AddressSanitizer
// and UBSan by test/cpp/cmake/solver_fuzz.cmake; `make test-fuzz`).
//
// Feeds random valid documents, byte-level mutations of them and random
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
#include "solver_test_util.h"

using namespace tlm::solver;

namespace {

std::string mutate(std::string s, std::mt19937_64& rng) {
  static const char kAlphabet[] = "{}[],:\"-0123456789eE.+ \nnulltruefalse\\u";
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  int edits = 1 + static_cast<int>(rng() % 6);
  for (int k = 0; k < edits && !s.empty(); ++k) {
    size_t at = pick(s.size());
    switch (rng() % 7) {
      case 0: s[at] = kAlphabet[pick(sizeof kAlphabet - 1)]; break;
      case 1: s.erase(at, 1 + pick(8)); break;
      case 2: s.insert(at, 1, kAlphabet[pick(sizeof kAlphabet - 1)]); break;
      case 3: s.resize(at); break;  // truncation
      case 4: s.insert(at, s.substr(pick(s.size()), pick(40))); break;
      case 5: s.insert(at, std::to_string(static_cast<int64_t>(rng()))); break;
      default: s[at] = static_cast<char>(rng() & 0xFF); break;
    }
  }
  return s;
}

void exercise(const std::string& text, std::mt19937_64& rng) {
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
  const auto t0 = std::chrono::steady_clock::now();
  long runs = 0;
  try {
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
      std::string doc = write_problem(testing::random_problem(rng));
      if (rng() % 4 == 0) doc = doc.substr(std::string("{\"problem\":").size(), doc.size() - 12);  // bare form
      exercise(doc, rng);
      for (int k = 0; k < 20; ++k) exercise(mutate(doc, rng), rng);
      std::string noise(rng() % 64, ' ');
      for (auto& c : noise) c = static_cast<char>(rng() & 0xFF);
      exercise(noise, rng);
      runs += 22;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "solver_fuzz: unexpected exception after %ld inputs: %s\n", runs, e.what());
    return 1;
  }
  std::printf("solver_fuzz: %ld inputs, no crash\n", runs);
  return 0;
}
