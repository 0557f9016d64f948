// TANDEM_CHECK: invariants that only a bug can break. Aborts with file:line.
// Never use on anything a user controls (requests, model files): return a Status.
#pragma once

#include <cstdio>
#include <cstdlib>

#define TANDEM_CHECK(cond)                                                                 \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: TANDEM_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)
