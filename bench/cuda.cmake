# bench_cuda_gemm (CUDA builds only): the invariant bf16-weight GEMM at
# M = 1, 4, 16, 512, 4096 against cuBLAS (loaded with dlopen) and against the
# device-memory read bandwidth measured in the same run (the library's
# measure_read_bandwidth, src/kernels/cuda/bandwidth.cu). A plain timing program
# (CUDA events), no Google Benchmark, so it carries to a GPU machine with no
# shared libraries beyond libcuda. See docs/benchmarks.md ("GPU (CUDA)").
if(TANDEM_HAVE_CUDA)
  add_executable(bench_cuda_gemm ${CMAKE_CURRENT_LIST_DIR}/cuda/gemm_bench.cpp ${CMAKE_CURRENT_LIST_DIR}/cuda/bench_util.cpp
    ${CMAKE_CURRENT_LIST_DIR}/cuda/quant_bench.cpp)
  target_compile_options(bench_cuda_gemm PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${TANDEM_WARNINGS}>")
  target_include_directories(bench_cuda_gemm PRIVATE ${PROJECT_SOURCE_DIR}/tests/kernels/cuda
    ${PROJECT_SOURCE_DIR}/src/kernels)
  target_link_libraries(bench_cuda_gemm PRIVATE tandem_kernels tandem_kernels_cuda ${CMAKE_DL_LIBS})
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

# bench_handoff_latency: what one kernel boundary costs a chain of small
# dependent kernels (plain launch, programmatic launch, a counter handoff);
# no tandem library. docs/benchmarks.md ("What a kernel boundary costs").
if(TANDEM_HAVE_CUDA)
  add_executable(bench_handoff_latency ${CMAKE_CURRENT_LIST_DIR}/cuda/handoff_latency.cu)
endif()

# libtandem_kernel_trace.so: preloaded into `tandem`, records every kernel's
# GPU start/end (graph replays included) through CUPTI's activity API and
# writes them as CSV at exit (TANDEM_KERNEL_TRACE); bench/cuda/trace_summary.py
# sums them per step. A diagnostic for the lent GPU machine, which has no
# Nsight Systems. Built only where the toolkit ships CUPTI.
if(TANDEM_HAVE_CUDA)
  find_library(TANDEM_CUPTI_LIBRARY NAMES cupti HINTS ${CUDAToolkit_LIBRARY_DIR}
    ${CUDAToolkit_LIBRARY_ROOT}/lib ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/lib64)
  find_path(TANDEM_CUPTI_INCLUDE cupti.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
    ${CUDAToolkit_LIBRARY_ROOT}/extras/CUPTI/include)
  if(TANDEM_CUPTI_LIBRARY AND TANDEM_CUPTI_INCLUDE)
    add_library(tandem_kernel_trace SHARED ${CMAKE_CURRENT_LIST_DIR}/cuda/kernel_trace.cpp)
    target_include_directories(tandem_kernel_trace PRIVATE ${TANDEM_CUPTI_INCLUDE} ${CUDAToolkit_INCLUDE_DIRS})
    target_link_libraries(tandem_kernel_trace PRIVATE ${TANDEM_CUPTI_LIBRARY})
  endif()
endif()
