# Shared build helpers for tandem's layers.

set(TANDEM_WARNINGS -Wall -Wextra -Wpedantic -Wno-unused-parameter)

# The sanitizer and fuzz builds (-g1, scripts/test.sh) name paths in their debug info
# relative to the checkout: ccache (base_dir) then hashes the same compilation in two
# clones alike, instead of hashing the build directory as it does for -g. Not in other
# builds, where a debugger should find the sources by their absolute paths.
if(TANDEM_SANITIZE OR TANDEM_FUZZ)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fdebug-prefix-map=${PROJECT_SOURCE_DIR}=.>")
endif()

# Extra flags for the test programs' own sources (not the libraries they test), e.g.
# -O1 or -O0: scripts/test.sh compiles them at a lower level than the libraries,
# as their code is assertions and set-up, which halves the build of the test binaries.
set(TANDEM_TEST_CXX_FLAGS "" CACHE STRING "Extra compiler flags for the test binaries' own sources")

if(TANDEM_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
  add_link_options(-fsanitize=address,undefined)
endif()

# tandem_layer(NAME SOURCES... DEPS ...)
# Defines static library tandem_NAME with public headers in src/NAME/include
# (included as "NAME/header.h") and links the given lower layers.
function(tandem_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(tandem_${name} STATIC ${ARG_SOURCES})
  target_include_directories(tandem_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_compile_options(tandem_${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${TANDEM_WARNINGS}>")
  target_link_libraries(tandem_${name} PUBLIC ${ARG_DEPS})
endfunction()

# tandem_test(NAME SOURCES... DEPS ... [LABEL unit|e2e|slow] [ENV VAR=value...]) — one GoogleTest
# binary, tests discovered at test time. Label "unit" (default) also runs under
# ASan/UBSan in scripts/test.sh; use "slow" or "e2e" for tests too heavy for that.
function(tandem_test name)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES;DEPS;ENV" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  separate_arguments(test_flags UNIX_COMMAND "${TANDEM_TEST_CXX_FLAGS}")
  target_compile_options(${name} PRIVATE ${TANDEM_WARNINGS} ${test_flags})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  set(env "TANDEM_SOURCE_DIR=${PROJECT_SOURCE_DIR}" ${ARG_ENV})
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST TEST_PREFIX "${name}:"
    PROPERTIES LABELS ${ARG_LABEL} ENVIRONMENT "${env}")
  if(ARG_LABEL STREQUAL "unit")
    if(NOT TARGET unit_tests)
      # `cmake --build DIR --target unit_tests`: only what `ctest -L unit` runs
      # (scripts/test.sh builds just this under the sanitizers).
      add_custom_target(unit_tests)
    endif()
    add_dependencies(unit_tests ${name})
  endif()
endfunction()
