# libFuzzer build (TANDEM_FUZZ=ON, clang only; tests/fuzz, scripts/fuzz.sh).
# Every library is instrumented for coverage and built with ASan + UBSan; the
# fuzz targets link libFuzzer's main. Use a separate build directory:
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DTANDEM_FUZZ=ON \
#     -DTANDEM_CUDA=OFF -DTANDEM_BUILD_TESTS=OFF -DTANDEM_BUILD_BENCH=OFF
if(NOT TANDEM_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TANDEM_FUZZ=ON needs clang (libFuzzer); configure with CC=clang CXX=clang++")
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-omit-frame-pointer;-fno-sanitize-recover=undefined>")
add_link_options(-fsanitize=address,undefined)
