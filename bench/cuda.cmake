# bench_cuda_gemm (CUDA builds only): the invariant bf16-weight GEMM at
# M = 1, 4, 16, 512, 4096 against cuBLAS (loaded with dlopen) and against the
# device-memory read bandwidth measured in the same run (the library's
# measure_read_bandwidth, src/kernels/cuda/bandwidth.cu). A plain timing program
# (CUDA events), no Google Benchmark, so it carries to a GPU machine with no
# shared libraries beyond libcuda. See docs/benchmarks.md ("GPU (CUDA)").
if(TANDEM_HAVE_CUDA)
  add_executable(bench_cuda_gemm ${CMAKE_CURRENT_LIST_DIR}/cuda/gemm_bench.cpp)
  target_compile_options(bench_cuda_gemm PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${TANDEM_WARNINGS}>")
  target_include_directories(bench_cuda_gemm PRIVATE ${PROJECT_SOURCE_DIR}/tests/kernels/cuda
    ${PROJECT_SOURCE_DIR}/src/kernels)
  target_link_libraries(bench_cuda_gemm PRIVATE tandem_kernels_cuda ${CMAKE_DL_LIBS})
endif()

# bench_stream_patterns: how fast the GPU streams a weight matrix under the
# access patterns of an M <= 8 GEMM (contiguous, the register-direct tile's
# rows, a fragment-major layout), with and without the mma chain; no tandem
# library. docs/benchmarks.md ("Where decode's GEMM time goes").
if(TANDEM_HAVE_CUDA)
  add_executable(bench_stream_patterns ${CMAKE_CURRENT_LIST_DIR}/cuda/stream_patterns.cu)
  target_include_directories(bench_stream_patterns PRIVATE ${PROJECT_SOURCE_DIR}/src/kernels
    ${PROJECT_SOURCE_DIR}/src/kernels/include ${PROJECT_SOURCE_DIR}/src/core/include)
endif()
