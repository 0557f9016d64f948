#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>
#include <unordered_map>

#include "added_tokens.h"
#include "bpe.h"
#include "core/mapped_file.h"
#include "decoders.h"
#include "normalizers.h"
#include "post_processor.h"
#include "pre_tokenizers.h"
#include "unicode.h"

namespace tandem::tok {

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;
  PostProcessor post;
  std::vector<AddedToken> added;
  std::unordered_map<int32_t, size_t> added_by_id;
  std::unordered_map<std::string, int32_t> added_by_content;
  // Per kind of added token: every added token (encode), and the non-special ones only
  // (encode_special_as_text: special tokens' text is ordinary text there).
  struct Matchers {
    AddedTokenMatcher raw;         // non-normalized added tokens
    AddedTokenMatcher normalized;  // normalized added tokens, on normalized text
  };
  Matchers all, non_special;
  int32_t vocab_size = 0;

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens, const Matchers& matchers) const;
  void encode_plain(std::string_view text, bool at_start, const AddedTokenMatcher& normalized_matcher,
                    std::vector<int32_t>& ids) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special, bool raw) const;
};

namespace {

// Hugging Face ignores the "id" of an added token on load: a token already in
// the model vocabulary (or added before) keeps that id, a new one gets the next
// id after the model vocabulary and earlier added tokens. Real files agree with
// this; hand-edited ones may not, and we follow Hugging Face.
int32_t assigned_id(const Tokenizer::Impl& impl, const std::string& content) {
  auto a = impl.added_by_content.find(content);
  if (a != impl.added_by_content.end()) return a->second;
  auto v = impl.model->vocab().find(content);
  if (v != impl.model->vocab().end()) return v->second;
  const int32_t model_size = static_cast<int32_t>(impl.model->vocab().size());
  int32_t max_added = -1;
  for (const auto& t : impl.added) max_added = std::max(max_added, t.id);
  if (max_added < 0) return model_size;
  return max_added >= model_size || model_size == 0 ? max_added + 1 : model_size;
}

Status parse_added_tokens(const nlohmann::json& j, Tokenizer::Impl& impl) {
  if (j.is_null()) return Status::Ok();
  if (!j.is_array()) return invalid_argument("added_tokens: expected an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& t = j[i];
    std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string())
      return invalid_argument(where + ": expected an object with integer \"id\" and string \"content\"");
    AddedToken a;
    a.id = t["id"].get<int32_t>();
    if (a.id < 0) return invalid_argument(where + ".id: negative");
    a.content = t["content"].get<std::string>();
    if (a.content.empty()) return invalid_argument(where + ".content: empty");
    a.single_word = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", false);
    a.special = t.value("special", false);
    a.id = assigned_id(impl, a.content);
    impl.added_by_id[a.id] = impl.added.size();
    impl.added_by_content[a.content] = a.id;
    impl.added.push_back(std::move(a));
  }
  return Status::Ok();
}

Tokenizer::Impl::Matchers build_matchers(const Tokenizer::Impl& impl, bool with_special) {
  std::vector<const AddedToken*> raw, norm;
  std::vector<std::string> raw_p, norm_p;
  for (const auto& a : impl.added) {
    if (a.special && !with_special) continue;
    // Hugging Face partitions on `normalized` alone (special tokens included).
    if (a.normalized && impl.normalizer) {
      std::string p = a.content;
      impl.normalizer->normalize(p);
      norm.push_back(&a);
      norm_p.push_back(std::move(p));
    } else if (a.normalized) {
      norm.push_back(&a);
      norm_p.push_back(a.content);
    } else {
      raw.push_back(&a);
      raw_p.push_back(a.content);
    }
  }
  return {AddedTokenMatcher(raw, raw_p), AddedTokenMatcher(norm, norm_p)};
}

Expected<std::shared_ptr<Tokenizer::Impl>> build(const nlohmann::json& root) {
  auto impl = std::make_shared<Tokenizer::Impl>();
  if (!root.is_object()) return invalid_argument("top level: expected a JSON object");
  auto field = [&](const char* k) { return root.contains(k) ? root[k] : nlohmann::json(); };
  const nlohmann::json model = field("model");
  if (!model.is_object()) return invalid_argument("model: missing or not an object");
  std::string type =
      model.contains("type") && model["type"].is_string() ? model["type"].get<std::string>() : "";
  if (type.empty() && model.contains("merges")) type = "BPE";
  if (type != "BPE") return unimplemented("model.type: '" + type + "' is not supported (only BPE)");
  auto bpe = BpeModel::from_json(model);
  if (!bpe.ok()) return bpe.status();
  impl->model = std::move(bpe).value();

  auto normalizer = make_normalizer(field("normalizer"), "normalizer");
  if (!normalizer.ok()) return normalizer.status();
  impl->normalizer = std::move(normalizer).value();
  auto pre = make_pre_tokenizer(field("pre_tokenizer"), "pre_tokenizer");
  if (!pre.ok()) return pre.status();
  impl->pre_tokenizer = std::move(pre).value();
  auto dec = make_decoder(field("decoder"), "decoder");
  if (!dec.ok()) return dec.status();
  impl->decoder = std::move(dec).value();
  TANDEM_RETURN_IF_ERROR(parse_added_tokens(field("added_tokens"), *impl));
  impl->all = build_matchers(*impl, true);
  impl->non_special = build_matchers(*impl, false);

  auto post = make_post_processor(field("post_processor"), "post_processor", [&](std::string_view tok) {
    auto it = impl->added_by_content.find(std::string(tok));
    if (it != impl->added_by_content.end()) return std::optional<int32_t>(it->second);
    auto v = impl->model->vocab().find(tok);
    return v == impl->model->vocab().end() ? std::nullopt : std::optional<int32_t>(v->second);
  });
  if (!post.ok()) return post.status();
  impl->post = std::move(post).value();

  impl->vocab_size = impl->model->max_id() + 1;
  for (const auto& a : impl->added) impl->vocab_size = std::max(impl->vocab_size, a.id + 1);
  return impl;
}

}  // namespace

Expected<Tokenizer> Tokenizer::from_json(std::string_view json, const std::string& origin) {
  try {
    nlohmann::json root = nlohmann::json::parse(json);
    auto impl = build(root);
    if (!impl.ok()) return impl.status().with_context(origin);
    return Tokenizer(std::move(impl).value());
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(origin + ": " + e.what());
  }
}

Expected<Tokenizer> Tokenizer::from_file(const std::string& path) {
  auto text = read_text_file(path);
  if (!text.ok()) return text.status();
  return from_json(*text, path);
}

void Tokenizer::Impl::encode_plain(std::string_view text, bool at_start,
                                   const AddedTokenMatcher& normalized_matcher,
                                   std::vector<int32_t>& ids) const {
  auto run_model = [&](std::string_view segment, bool seg_start) {
    if (!pre_tokenizer) {
      model->encode_word(segment, ids);
      return;
    }
    pre_tokenizer->pre_tokenize(segment, seg_start,
                                [&](std::string_view piece, bool) { model->encode_word(piece, ids); });
  };
  if (!normalizer && normalized_matcher.empty()) {
    run_model(text, at_start);
    return;
  }
  std::string normalized(text);
  if (normalizer) normalizer->normalize(normalized);
  if (normalized_matcher.empty()) {
    run_model(normalized, at_start);
    return;
  }
  std::vector<Segment> segments;
  normalized_matcher.split(normalized, segments);
  for (const auto& s : segments) {
    if (s.added_id >= 0)
      ids.push_back(s.added_id);
    else
      run_model(std::string_view(normalized).substr(s.begin, s.end - s.begin), at_start && s.begin == 0);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens, impl_->all);
}

std::vector<int32_t> Tokenizer::encode_special_as_text(std::string_view text) const {
  return impl_->encode(text, false, impl_->non_special);
}

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view text, bool add_special_tokens,
                                             const Matchers& matchers) const {
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = utf8_lossy(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids.insert(ids.end(), post.prefix.begin(), post.prefix.end());
  if (matchers.raw.empty()) {
    encode_plain(text, true, matchers.normalized, ids);
  } else {
    std::vector<Segment> segments;
    matchers.raw.split(text, segments);
    for (const auto& s : segments) {
      if (s.added_id >= 0)
        ids.push_back(s.added_id);
      else
        encode_plain(text.substr(s.begin, s.end - s.begin), s.begin == 0, matchers.normalized, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), post.suffix.begin(), post.suffix.end());
  return ids;
}

std::string Tokenizer::Impl::decode(std::span<const int32_t> ids, bool skip_special, bool raw) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto a = added_by_id.find(id);
    if (a != added_by_id.end()) {
      if (skip_special && added[a->second].special) continue;
      tokens.push_back(added[a->second].content);
    } else if (const std::string* t = model->id_to_token(id)) {
      tokens.push_back(*t);
    }
  }
  std::string out;
  if (decoder) {
    decoder->decode(tokens, raw);
    for (const auto& t : tokens) out += t;
  } else {
    for (size_t k = 0; k < tokens.size(); ++k) {
      if (k) out.push_back(' ');
      out += tokens[k];
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens, false);
}

std::string Tokenizer::decode_raw(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens, true);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  auto a = impl_->added_by_id.find(id);
  if (a != impl_->added_by_id.end()) return impl_->added[a->second].content;
  if (const std::string* t = impl_->model->id_to_token(id)) return *t;
  return std::nullopt;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto a = impl_->added_by_content.find(std::string(token));
  if (a != impl_->added_by_content.end()) return a->second;
  auto v = impl_->model->vocab().find(token);
  if (v != impl_->model->vocab().end()) return v->second;
  return std::nullopt;
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

bool Tokenizer::is_special(int32_t id) const {
  auto a = impl_->added_by_id.find(id);
  return a != impl_->added_by_id.end() && impl_->added[a->second].special;
}

}  // namespace tandem::tok
