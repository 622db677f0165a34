// The one assertion of the C++ tests: a failed check is printed and counted, and the test's main
// exits non-zero if any failed.
#pragma once

#include <cstdio>

namespace tokenmill_test {

inline int failures = 0;

inline void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace tokenmill_test
