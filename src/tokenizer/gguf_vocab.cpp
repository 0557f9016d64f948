#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

namespace tandem::tok {
namespace {

using json = nlohmann::json;

constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

GgufTokenType type_of(const GgufVocab& v, size_t id) {
  return id < v.token_types.size() ? static_cast<GgufTokenType>(v.token_types[id]) : GgufTokenType::normal;
}

json split_then_byte_level(const char* pattern) {
  return {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"},
         {"add_prefix_space", false},
         {"trim_offsets", false},
         {"use_regex", false}}}}};
}

// Pre-tokenizer and normalizer of a byte-level ("gpt2") vocabulary by
// tokenizer.ggml.pre; sets ignore_merges as the Hugging Face file has it.
Status byte_level_pipeline(const GgufVocab& v, const std::string& source, json& j, bool& ignore_merges) {
  const std::string& pre = v.pre;
  j["normalizer"] = nullptr;
  ignore_merges = false;
  if (pre.empty() || pre == "default" || pre == "gpt2" || pre == "gpt-2") {
    j["pre_tokenizer"] = {
        {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}};
  } else if (pre == "llama-bpe" || pre == "llama3") {
    j["pre_tokenizer"] = split_then_byte_level(kLlama3Pattern);
    ignore_merges = true;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    j["normalizer"] = {{"type", "NFC"}};
    j["pre_tokenizer"] = split_then_byte_level(kQwen2Pattern);
  } else {
    return unimplemented(source + ": tokenizer.ggml.pre \"" + pre +
                         "\" is not supported (supported: default, gpt2, llama-bpe, llama3, qwen2, "
                         "deepseek-r1-qwen)");
  }
  j["decoder"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  return Status::Ok();
}

// Start offsets of the UTF-8 code points of `s` after the first (split points).
std::vector<size_t> split_points(std::string_view s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

// Tokens longer than this get no merges built (each split costs a lookup of
// the token's length, so a hostile file of huge tokens would be quadratic);
// SentencePiece vocabularies' tokens are a few dozen bytes at most.
constexpr size_t kMaxMergedTokenBytes = 256;

// transformers' merges for a SentencePiece BPE model: for each token in id
// order, every split into two vocabulary pieces (ordered by the pieces' ids),
// then all of them stably sorted by the token's score, highest first.
json merges_from_scores(const GgufVocab& v) {
  std::unordered_map<std::string_view, int32_t> ids;
  for (size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], static_cast<int32_t>(i));
  struct Merge {
    float score;
    int32_t left, right;
  };
  std::vector<Merge> merges;
  for (size_t t = 0; t < v.tokens.size(); ++t) {
    const std::string_view token = v.tokens[t];
    if (token.size() > kMaxMergedTokenBytes) continue;
    const size_t first = merges.size();
    for (size_t at : split_points(token)) {
      auto l = ids.find(token.substr(0, at));
      auto r = ids.find(token.substr(at));
      if (l != ids.end() && r != ids.end()) merges.push_back({v.scores[t], l->second, r->second});
    }
    std::sort(merges.begin() + static_cast<std::ptrdiff_t>(first), merges.end(),
              [](const Merge& a, const Merge& b) {
                return a.left != b.left ? a.left < b.left : a.right < b.right;
              });
  }
  std::stable_sort(merges.begin(), merges.end(),
                   [](const Merge& a, const Merge& b) { return a.score > b.score; });
  json out = json::array();
  for (const Merge& m : merges) out.push_back({v.tokens[m.left], v.tokens[m.right]});
  return out;
}

void sentencepiece_pipeline(const GgufVocab& v, json& j) {
  const bool prefix = v.add_space_prefix.value_or(true);
  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}};
  j["normalizer"] = prefix ? json{{"type", "Sequence"},
                                  {"normalizers", {{{"type", "Prepend"}, {"prepend", kSpace}}, replace}}}
                           : replace;
  j["pre_tokenizer"] = nullptr;
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
}

json string_list(const std::vector<std::string_view>& items) {
  json out = json::array();
  for (std::string_view s : items) out.push_back(std::string(s));
  return out;
}

json template_processor(const GgufVocab& v, bool bos, bool eos) {
  json single = json::array(), specials = json::object();
  auto add = [&](int32_t id) {
    const std::string name(v.tokens[static_cast<size_t>(id)]);
    single.push_back({{"SpecialToken", {{"id", name}, {"type_id", 0}}}});
    specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
  };
  if (bos) add(v.bos_id);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos) add(v.eos_id);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
}

Status check_id(int32_t id, const GgufVocab& v, const std::string& source, const char* key) {
  if (id < -1 || id >= static_cast<int64_t>(v.tokens.size()))
    return invalid_argument(source + ": tokenizer.ggml." + key + " " + std::to_string(id) +
                            " is not a token id (" + std::to_string(v.tokens.size()) + " tokens)");
  return Status::Ok();
}

}  // namespace

Expected<std::string> tokenizer_json_from_gguf(const GgufVocab& v, const std::string& source) {
  if (v.tokens.empty()) return invalid_argument(source + ": tokenizer.ggml.tokens is empty");
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size())
    return invalid_argument(source + ": tokenizer.ggml.token_type has " +
                            std::to_string(v.token_types.size()) + " entries for " +
                            std::to_string(v.tokens.size()) + " tokens");
  if (!v.scores.empty() && v.scores.size() != v.tokens.size())
    return invalid_argument(source + ": tokenizer.ggml.scores has " + std::to_string(v.scores.size()) +
                            " entries for " + std::to_string(v.tokens.size()) + " tokens");
  TANDEM_RETURN_IF_ERROR(check_id(v.bos_id, v, source, "bos_token_id"));
  TANDEM_RETURN_IF_ERROR(check_id(v.eos_id, v, source, "eos_token_id"));
  TANDEM_RETURN_IF_ERROR(check_id(v.unknown_id, v, source, "unknown_token_id"));
  const bool sentencepiece = v.model == "llama";
  if (!sentencepiece && v.model != "gpt2")
    return unimplemented(source + ": tokenizer.ggml.model \"" + v.model +
                         "\" is not supported (supported: gpt2, llama)");
  json j = json::object();
  j["version"] = "1.0";
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr}};
  json vocab = json::object();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const std::string token(v.tokens[i]);
    if (!vocab.contains(token)) vocab[token] = i;  // a duplicate string keeps its first id
  }
  model["vocab"] = std::move(vocab);
  if (sentencepiece) {
    sentencepiece_pipeline(v, j);
    if (!v.merges.empty()) {
      model["merges"] = string_list(v.merges);
    } else if (!v.scores.empty()) {
      model["merges"] = merges_from_scores(v);
    } else {
      return invalid_argument(source +
                              ": a \"llama\" tokenizer needs tokenizer.ggml.scores or tokenizer.ggml.merges");
    }
    model["byte_fallback"] = true;
    model["fuse_unk"] = true;
    model["unk_token"] =
        v.unknown_id >= 0 ? json(std::string(v.tokens[static_cast<size_t>(v.unknown_id)])) : json();
    model["ignore_merges"] = false;
  } else {
    bool ignore_merges = false;
    TANDEM_RETURN_IF_ERROR(byte_level_pipeline(v, source, j, ignore_merges));
    if (v.merges.empty())
      return invalid_argument(source + ": a \"gpt2\" tokenizer needs tokenizer.ggml.merges");
    model["merges"] = string_list(v.merges);
    model["byte_fallback"] = false;
    model["fuse_unk"] = false;
    model["unk_token"] = nullptr;
    model["ignore_merges"] = ignore_merges;
  }
  j["model"] = std::move(model);
  json added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const GgufTokenType t = type_of(v, i);
    const bool special = t == GgufTokenType::control || t == GgufTokenType::unknown;
    if (!special && t != GgufTokenType::user_defined) continue;
    added.push_back({{"id", i},
                     {"content", std::string(v.tokens[i])},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", special}});
  }
  j["added_tokens"] = std::move(added);
  const bool bos = v.add_bos.value_or(sentencepiece) && v.bos_id >= 0;
  const bool eos = v.add_eos.value_or(false) && v.eos_id >= 0;
  j["post_processor"] = bos || eos ? template_processor(v, bos, eos) : json();
  try {
    return j.dump();
  } catch (const json::exception& e) {  // a token that is not valid UTF-8
    return invalid_argument(source + ": tokenizer.ggml.tokens: " + e.what());
  }
}

Expected<Tokenizer> tokenizer_from_gguf(const GgufVocab& v, const std::string& source) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, tokenizer_json_from_gguf(v, source));
  return Tokenizer::from_json(text, source + " (tokenizer.ggml.*)");
}

std::vector<int32_t> gguf_end_of_generation_ids(const GgufVocab& v) {
  static const std::string_view kEnds[] = {"<|eot_id|>",    "<|eom_id|>",    "<|im_end|>",      "<|end|>",
                                           "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "</s>"};
  std::vector<int32_t> out;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (type_of(v, i) != GgufTokenType::control) continue;
    if (std::find(std::begin(kEnds), std::end(kEnds), v.tokens[i]) != std::end(kEnds))
      out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

}  // namespace tandem::tok
