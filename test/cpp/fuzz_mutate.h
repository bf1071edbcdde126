// Mutations shared by the reader fuzzers (solver_fuzz.cpp, json_fuzz.cpp).
//
// Byte flips alone rarely reach the paths hostile files take: they break the
// syntax near the start and the reader stops there. The structure-aware
// mutations below keep the document well-formed while making it extreme:
// deep nesting (stack exhaustion in recursive readers), numbers at and past
// the int64 / double limits, and strings with surrogate pairs, lone surrogate
// halves and control characters.
#pragma once

#include <sanitizer/common_interface_defs.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

namespace tlm::fuzz {

// The input being read. `save_input()` writes it to the file `watch_inputs`
// named -- when a reader raises what it must not, or when a sanitizer stops the
// run -- so a failure can be reproduced.
inline std::string& current_input() {
  static std::string text;
  return text;
}
inline const char*& failure_file() {
  static const char* name = "fuzz_failure.json";
  return name;
}
inline void save_input() {
  if (FILE* f = std::fopen(failure_file(), "wb")) {
    std::fwrite(current_input().data(), 1, current_input().size(), f);
    std::fclose(f);
    std::fprintf(stderr, "the input is in %s\n", failure_file());
  }
}
inline void watch_inputs(const char* file) {
  failure_file() = file;
  __sanitizer_set_death_callback(save_input);
}

inline size_t pick(std::mt19937_64& rng, size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; }

// Byte-level edits: replaced / deleted / inserted characters, truncation, copies.
inline std::string mutate_bytes(std::string s, std::mt19937_64& rng) {
  static const char kAlphabet[] = "{}[],:\"-0123456789eE.+ \nnulltruefalse\\u";
  int edits = 1 + static_cast<int>(rng() % 6);
  for (int k = 0; k < edits && !s.empty(); ++k) {
    size_t at = pick(rng, s.size());
    switch (rng() % 7) {
      case 0: s[at] = kAlphabet[pick(rng, sizeof kAlphabet - 1)]; break;
      case 1: s.erase(at, 1 + pick(rng, 8)); break;
      case 2: s.insert(at, 1, kAlphabet[pick(rng, sizeof kAlphabet - 1)]); break;
      case 3: s.resize(at); break;  // truncation
      case 4: s.insert(at, s.substr(pick(rng, s.size()), pick(rng, 40))); break;
      case 5: s.insert(at, std::to_string(static_cast<int64_t>(rng()))); break;
      default: s[at] = static_cast<char>(rng() & 0xFF); break;
    }
  }
  return s;
}

// A well-formed value nested `depth` levels deep (arrays and objects mixed).
inline std::string deep_value(size_t depth, std::mt19937_64& rng) {
  std::string open, close;
  open.reserve(depth * 6);
  for (size_t d = 0; d < depth; ++d) {
    if (rng() % 2) {
      open += '[';
      close += ']';
    } else {
      open += "{\"k\":";
      close += '}';
    }
  }
  std::string inner = rng() % 2 ? "0" : "\"x\"";
  return open + inner + std::string(close.rbegin(), close.rend());
}

inline const char* extreme_number(std::mt19937_64& rng) {
  static const char* kNumbers[] = {
      "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
      "18446744073709551616", "1e308", "1e309", "-1e309", "1e-400", "-0", "0.5", "-0.0e0",
      "4.9e-324", "123456789012345678901234567890", "1E+18", "2147483648", "-2147483649", "1e19",
  };
  return kNumbers[pick(rng, sizeof kNumbers / sizeof kNumbers[0])];
}

inline const char* odd_string(std::mt19937_64& rng) {
  static const char* kStrings[] = {
      "\"\\ud83d\\ude00\"", "\"\\ud83d\"", "\"\\ude00\"", "\"\\ud83dx\"", "\"\\ud83d\\u0041\"",
      "\"\\u0000\"", "\"\\u001b[31mred\"", "\"\xff\xfe\"", "\"\\uZZZZ\"", "\"\\u12\"",
  };
  return kStrings[pick(rng, sizeof kStrings / sizeof kStrings[0])];
}

// Position of a random value start: just after ':' or ',' or '[' (or 0).
inline size_t value_position(const std::string& s, std::mt19937_64& rng) {
  for (int tries = 0; tries < 16 && !s.empty(); ++tries) {
    size_t at = pick(rng, s.size());
    if (s[at] == ':' || s[at] == ',' || s[at] == '[') return at + 1;
  }
  return 0;
}

// Replaces the number starting at a random digit with an extreme one.
inline std::string replace_number(std::string s, std::mt19937_64& rng) {
  for (int tries = 0; tries < 16 && !s.empty(); ++tries) {
    size_t at = pick(rng, s.size());
    if (!(s[at] == '-' || (s[at] >= '0' && s[at] <= '9'))) continue;
    while (at > 0 && (s[at - 1] == '-' || (s[at - 1] >= '0' && s[at - 1] <= '9'))) --at;
    size_t end = at;
    while (end < s.size() && (s[end] == '-' || s[end] == '+' || s[end] == '.' || s[end] == 'e' || s[end] == 'E' ||
                              (s[end] >= '0' && s[end] <= '9')))
      ++end;
    return s.replace(at, end - at, extreme_number(rng));
  }
  return s;
}

// Replaces a random string literal with an odd one.
inline std::string replace_string(std::string s, std::mt19937_64& rng) {
  for (int tries = 0; tries < 16 && !s.empty(); ++tries) {
    size_t at = s.find('"', pick(rng, s.size()));
    if (at == std::string::npos) continue;
    size_t end = s.find('"', at + 1);
    if (end == std::string::npos) continue;
    return s.replace(at, end - at + 1, odd_string(rng));
  }
  return s;
}

// One structure-aware mutation: a deep value in place of (or next to) a
// member, an unknown member holding a deep value, an extreme number, an odd string.
inline std::string mutate_structure(std::string s, std::mt19937_64& rng) {
  switch (rng() % 5) {
    case 0: {  // deep value where a value starts (depths around and far past the limits)
      static const size_t kDepths[] = {8, 200, 511, 512, 513, 5000, 100000};
      size_t at = value_position(s, rng);
      return s.insert(at, deep_value(kDepths[pick(rng, 7)], rng) + (at && s[at - 1] == '[' ? "," : ""));
    }
    case 1: {  // an unknown member with a deep value, first in the top-level object
      size_t at = s.find('{');
      if (at == std::string::npos) return s;
      return s.insert(at + 1, "\"unknown\":" + deep_value(1 + pick(rng, 100000), rng) + ",");
    }
    case 2: return replace_number(std::move(s), rng);
    case 3: return replace_string(std::move(s), rng);
    default: return mutate_bytes(replace_number(std::move(s), rng), rng);
  }
}

}  // namespace tlm::fuzz
