# bench_kernels: streaming read bandwidth and matmul throughput, measured in
# one run so matmul figures are reported as a fraction of this machine's own
# bandwidth. See docs/benchmarks.md ("Kernels") for the command and results.
add_executable(bench_kernels
  ${CMAKE_CURRENT_LIST_DIR}/kernels/main.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels/bandwidth.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels/matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels/matmul_quant.cpp
  ${CMAKE_CURRENT_LIST_DIR}/kernels/interleaved.cpp)
target_compile_options(bench_kernels PRIVATE ${TANDEM_WARNINGS})
target_link_libraries(bench_kernels PRIVATE tandem_kernels benchmark::benchmark)
# White-box: BM_QuantizeActivations calls each ISA's KernelTable entry.
target_include_directories(bench_kernels PRIVATE ${PROJECT_SOURCE_DIR}/src/kernels)
