// BpeModel: the "BPE" model of tokenizer.json. Maps one pre-tokenized word to
// token ids by applying ranked merges (lowest rank first, leftmost on ties),
// with byte_fallback, unk_token (+fuse_unk), ignore_merges and the
// continuing_subword_prefix / end_of_word_suffix affixes.
// Immutable after load; encode_word() is thread-safe (per-thread word cache).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace tandem::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept;
};
using VocabMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // Builds from the "model" object; errors name the offending field/merge.
  static Expected<std::unique_ptr<BpeModel>> from_json(const nlohmann::json& model);

  // Appends the ids of `word` to `out`.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  const VocabMap& vocab() const { return vocab_; }
  // Token text by id, or nullptr when the model has no such id.
  const std::string* id_to_token(int32_t id) const;
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }

 private:
  struct MergeResult {
    int32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void encode_cached(std::string_view word, std::vector<int32_t>& out) const;
  const MergeResult* find_merge(int32_t a, int32_t b) const;

  VocabMap vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<uint8_t> has_token_;
  // Open-addressing table of merges keyed by the (left, right) id pair.
  std::vector<uint64_t> merge_keys_;
  std::vector<MergeResult> merge_values_;
  uint64_t merge_mask_ = 0;
  std::string unk_token_;
  int32_t unk_id_ = -1;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  // SentencePiece-style vocabularies: when no token has "\u2581" right after
  // another character, no merge can cross such a boundary, so long words are
  // split there and encoded piecewise (same result, cacheable pieces).
  bool split_at_metaspace_ = false;
  int32_t byte_ids_[256];     // "<0xXX>" ids for byte_fallback, -1 when absent
  uint64_t instance_id_ = 0;  // keys the per-thread word cache
};

}  // namespace tandem::tok
