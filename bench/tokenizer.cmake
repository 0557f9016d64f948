# bench_tokenizer: tandem's encode throughput (MB/s, one thread). Compare with
# tests/tokenizer/npm/bench_hf.mjs on the same text; see docs/benchmarks.md.
add_executable(bench_tokenizer ${CMAKE_CURRENT_LIST_DIR}/tokenizer_bench.cpp)
target_compile_options(bench_tokenizer PRIVATE ${TANDEM_WARNINGS})
target_link_libraries(bench_tokenizer PRIVATE tandem_tokenizer benchmark::benchmark)
target_compile_definitions(bench_tokenizer PRIVATE TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
