# bench_sampler: the host Sampler's pick of one 151,936-logit row (the Qwen
# vocabulary) under the sampling chains users send; docs/benchmarks.md
# "The host sampler".
add_executable(bench_sampler ${CMAKE_CURRENT_LIST_DIR}/sampler_bench.cpp)
target_compile_options(bench_sampler PRIVATE ${TANDEM_WARNINGS})
target_link_libraries(bench_sampler PRIVATE tandem_sampling benchmark::benchmark)
