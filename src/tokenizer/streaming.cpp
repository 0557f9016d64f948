#include "tokenizer/streaming.h"

#include <span>

#include "unicode.h"

namespace tandem::tok {

// The window ids_[prefix_, size) is decoded whole; the text of ids_[prefix_,
// read_) was emitted earlier (plus `held_offset_` more bytes of the newer part).
// Keeping one old token in the window lets decoders that treat the first
// token specially (Strip, Metaspace) behave as in a full decode.
std::string StreamingDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string after = tokenizer_.decode_raw(all.subspan(prefix_), skip_special_);
  if (after == tokenizer_.decode_raw(all.subspan(prefix_, ids_.size() - 1 - prefix_), skip_special_)) {
    ids_.pop_back();  // the token adds no text (e.g. a skipped special token): keep the window small
    return {};
  }
  std::string before = tokenizer_.decode_raw(all.subspan(prefix_, read_ - prefix_), skip_special_);
  if (after.size() <= before.size() || after.compare(0, before.size(), before) != 0) return {};
  std::string_view delta = std::string_view(after).substr(before.size());
  if (delta.size() < emitted_in_delta_ || delta.compare(0, emitted_in_delta_, pending_) != 0) return {};
  std::string_view fresh = delta.substr(emitted_in_delta_);
  size_t complete = utf8_complete_prefix(fresh);
  // A window that keeps growing without completing is garbage (e.g. endless lead
  // bytes): give up holding so the cost per token stays bounded.
  if (ids_.size() - prefix_ > kMaxHeldIds) complete = fresh.size();
  std::string out = utf8_lossy(fresh.substr(0, complete));
  if (complete == fresh.size()) {
    prefix_ = read_;
    read_ = ids_.size();
    emitted_in_delta_ = 0;
    pending_.clear();
    if (prefix_ > 64) {  // forget ids nobody will look at again
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
      read_ -= prefix_;
      prefix_ = 0;
    }
  } else {
    // Emit what is final (e.g. an invalid byte before a new lead byte), hold the rest.
    pending_.assign(delta.substr(0, emitted_in_delta_ + complete));
    emitted_in_delta_ += complete;
  }
  return out;
}

std::string StreamingDetokenizer::flush() {
  std::span<const int32_t> all(ids_);
  std::string before = tokenizer_.decode_raw(all.subspan(prefix_, read_ - prefix_), skip_special_);
  std::string after = tokenizer_.decode_raw(all.subspan(prefix_), skip_special_);
  size_t skip = before.size() + emitted_in_delta_;
  ids_.clear();
  prefix_ = read_ = emitted_in_delta_ = 0;
  pending_.clear();
  if (after.size() <= skip || after.compare(0, before.size(), before) != 0) return {};
  return utf8_lossy(std::string_view(after).substr(skip));
}

}  // namespace tandem::tok
