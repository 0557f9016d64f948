#include "bpe.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>

#include "unicode.h"

namespace tandem::tok {

size_t StringHash::operator()(std::string_view s) const noexcept {
  // FNV-1a over 8-byte chunks: fast for the short strings tokenizers hash.
  uint64_t h = 0xcbf29ce484222325ULL ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ULL;
  h ^= h >> 32;
  return static_cast<size_t>(h);
}

namespace {

uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

constexpr uint64_t kEmptyKey = ~0ULL;

std::atomic<uint64_t> g_next_instance{1};

// Per-thread cache of word -> ids for one BpeModel instance at a time.
struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};
constexpr size_t kWordCacheCapacity = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 64;
constexpr const char kMetaspace[] = "\xE2\x96\x81";
constexpr size_t kMetaspaceBytes = 3;

// True when some token contains U+2581 directly after a different character.
bool metaspace_inside_token(const VocabMap& vocab) {
  for (const auto& [tok, id] : vocab) {
    for (size_t p = tok.find(kMetaspace, 1); p != std::string::npos; p = tok.find(kMetaspace, p + 1)) {
      if (!(p >= kMetaspaceBytes && tok.compare(p - kMetaspaceBytes, kMetaspaceBytes, kMetaspace) == 0))
        return true;
    }
  }
  return false;
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t merged_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

Expected<std::unique_ptr<BpeModel>> BpeModel::from_json(const nlohmann::json& model) {
  auto m = std::unique_ptr<BpeModel>(new BpeModel());
  m->instance_id_ = g_next_instance.fetch_add(1);
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return invalid_argument("model.vocab: missing or not an object");
  int32_t max_id = -1;
  m->vocab_.reserve(model["vocab"].size());
  for (auto it = model["vocab"].begin(); it != model["vocab"].end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > (1 << 30))
      return invalid_argument("model.vocab['" + it.key() + "']: id is not a valid non-negative integer");
    int32_t id = it.value().get<int32_t>();
    m->vocab_.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  // Ids index a dense table: a vocab whose ids run far past its size (one entry with
  // id 10^9, say) is malformed, not a reason to allocate gigabytes.
  const int64_t entries = static_cast<int64_t>(m->vocab_.size());
  if (max_id >= std::max<int64_t>(2 * entries, entries + 65536))
    return invalid_argument("model.vocab: ids run to " + std::to_string(max_id) + " for " +
                            std::to_string(entries) + " entries (ids must be about dense)");
  m->id_to_token_.resize(max_id + 1);
  m->has_token_.assign(max_id + 1, 0);
  for (const auto& [tok, id] : m->vocab_) {
    m->id_to_token_[id] = tok;
    m->has_token_[id] = 1;
  }
  auto str_field = [&](const char* name) -> std::string {
    auto it = model.find(name);
    return it != model.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto bool_field = [&](const char* name) {
    auto it = model.find(name);
    return it != model.end() && it->is_boolean() && it->get<bool>();
  };
  m->unk_token_ = str_field("unk_token");
  m->prefix_ = str_field("continuing_subword_prefix");
  m->suffix_ = str_field("end_of_word_suffix");
  m->byte_fallback_ = bool_field("byte_fallback");
  m->fuse_unk_ = bool_field("fuse_unk");
  m->ignore_merges_ = bool_field("ignore_merges");
  if (auto d = model.find("dropout"); d != model.end() && !d->is_null() && d->get<double>() > 0.0)
    return unimplemented("model.dropout: BPE dropout is not supported by tandem");
  m->split_at_metaspace_ = m->prefix_.empty() && m->suffix_.empty() &&
                           m->vocab_.count(std::string(kMetaspace)) && !metaspace_inside_token(m->vocab_);
  if (!m->unk_token_.empty()) {
    auto it = m->vocab_.find(m->unk_token_);
    if (it == m->vocab_.end())
      return invalid_argument("model.unk_token '" + m->unk_token_ + "' is not in model.vocab");
    m->unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = m->vocab_.find(std::string_view(name));
    m->byte_ids_[b] = it == m->vocab_.end() ? -1 : it->second;
  }

  const auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array())
    return invalid_argument("model.merges: missing or not an array");
  const auto& merges = *merges_it;
  size_t cap = 16;
  while (cap < merges.size() * 2 + 16) cap <<= 1;
  m->merge_keys_.assign(cap, kEmptyKey);
  m->merge_values_.resize(cap);
  m->merge_mask_ = cap - 1;
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& e = merges[r];
    std::string a, b;
    if (e.is_string()) {
      const auto& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return invalid_argument("model.merges[" + std::to_string(r) + "] '" + s +
                                "': expected two tokens separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return invalid_argument("model.merges[" + std::to_string(r) + "]: expected \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = m->vocab_.find(a), ib = m->vocab_.find(b);
    if (ia == m->vocab_.end() || ib == m->vocab_.end())
      return invalid_argument("model.merges[" + std::to_string(r) + "] ('" + a + "', '" + b +
                              "'): token not in model.vocab");
    std::string merged = a + (b.compare(0, m->prefix_.size(), m->prefix_) == 0 && !m->prefix_.empty()
                                  ? b.substr(m->prefix_.size())
                                  : b);
    auto im = m->vocab_.find(merged);
    if (im == m->vocab_.end())
      return invalid_argument("model.merges[" + std::to_string(r) + "]: merged token '" + merged +
                              "' not in model.vocab");
    uint64_t key = pair_key(ia->second, ib->second);
    size_t slot = mix(key) & m->merge_mask_;
    while (m->merge_keys_[slot] != kEmptyKey && m->merge_keys_[slot] != key)
      slot = (slot + 1) & m->merge_mask_;
    if (m->merge_keys_[slot] == key) continue;  // first (lowest) rank wins
    m->merge_keys_[slot] = key;
    m->merge_values_[slot] = {static_cast<int32_t>(r), im->second};
  }
  return m;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(id_to_token_.size()) || !has_token_[id]) return nullptr;
  return &id_to_token_[id];
}

const BpeModel::MergeResult* BpeModel::find_merge(int32_t a, int32_t b) const {
  uint64_t key = pair_key(a, b);
  size_t slot = mix(key) & merge_mask_;
  while (true) {
    uint64_t k = merge_keys_[slot];
    if (k == key) return &merge_values_[slot];
    if (k == kEmptyKey) return nullptr;
    slot = (slot + 1) & merge_mask_;
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (split_at_metaspace_ && word.size() > kMaxCachedWordBytes) {
    size_t start = 0;
    for (size_t i = 1; i + kMetaspaceBytes <= word.size(); ++i) {
      if (word.compare(i, kMetaspaceBytes, kMetaspace) == 0 &&
          !(i >= kMetaspaceBytes && word.compare(i - kMetaspaceBytes, kMetaspaceBytes, kMetaspace) == 0)) {
        encode_cached(word.substr(start, i - start), out);
        start = i;
      }
    }
    encode_cached(word.substr(start), out);
    return;
  }
  encode_cached(word, out);
}

void BpeModel::encode_cached(std::string_view word, std::vector<int32_t>& out) const {
  if (word.size() > kMaxCachedWordBytes) {
    merge_word(word, out);
    return;
  }
  thread_local WordCache cache;
  if (cache.owner != instance_id_) {
    cache.map.clear();
    cache.owner = instance_id_;
  }
  auto it = cache.map.find(word);
  if (it != cache.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  size_t before = out.size();
  merge_word(word, out);
  if (cache.map.size() >= kWordCacheCapacity) cache.map.clear();
  cache.map.emplace(std::string(word), std::vector<int32_t>(out.begin() + before, out.end()));
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::string piece;
  symbols.clear();
  bool last_unk = false;
  size_t i = 0;
  while (i < word.size()) {
    size_t n = std::min(utf8_len(static_cast<unsigned char>(word[i])), word.size() - i);
    bool first = i == 0, last = i + n == word.size();
    piece.clear();
    if (!first) piece += prefix_;
    piece.append(word.substr(i, n));
    if (last) piece += suffix_;
    auto add = [&](int32_t id) {
      int32_t idx = static_cast<int32_t>(symbols.size());
      symbols.push_back({id, idx - 1, idx + 1});
    };
    auto v = vocab_.find(std::string_view(piece));
    if (v != vocab_.end()) {
      add(v->second);
      last_unk = false;
    } else {
      bool done = false;
      if (byte_fallback_) {
        bool all = true;
        for (size_t k = 0; k < n; ++k) all &= byte_ids_[static_cast<unsigned char>(word[i + k])] >= 0;
        if (all) {
          for (size_t k = 0; k < n; ++k) add(byte_ids_[static_cast<unsigned char>(word[i + k])]);
          done = true;
          last_unk = false;
        }
      }
      if (!done && unk_id_ >= 0) {
        if (!(fuse_unk_ && last_unk)) add(unk_id_);
        last_unk = true;
      }
    }
    i += n;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  thread_local std::vector<Candidate> heap_storage;
  heap_storage.clear();
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap(std::greater<>(),
                                                                              std::move(heap_storage));
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const MergeResult* mr = find_merge(symbols[k].id, symbols[k + 1].id))
      heap.push({mr->rank, static_cast<int32_t>(k), mr->merged_id});
  }
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& s = symbols[c.pos];
    if (s.id < 0 || s.next < 0) continue;
    const MergeResult* mr = find_merge(s.id, symbols[s.next].id);
    if (!mr || mr->merged_id != c.merged_id || mr->rank != c.rank) continue;
    Symbol& right = symbols[s.next];
    s.id = c.merged_id;
    right.id = -1;
    s.next = right.next;
    if (s.next >= 0) symbols[s.next].prev = c.pos;
    if (s.prev >= 0) {
      if (const MergeResult* p = find_merge(symbols[s.prev].id, s.id))
        heap.push({p->rank, s.prev, p->merged_id});
    }
    if (s.next >= 0) {
      if (const MergeResult* p = find_merge(s.id, symbols[s.next].id))
        heap.push({p->rank, c.pos, p->merged_id});
    }
  }
  for (int32_t k = 0; k >= 0; k = symbols[k].next) out.push_back(symbols[k].id);
}

}  // namespace tandem::tok
