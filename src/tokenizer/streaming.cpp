#include "tokenizer/streaming.h"

#include <span>

#include "unicode.h"

namespace tandem::tok {

std::string StreamingDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string before = tokenizer_.decode_raw(all.subspan(prefix_, read_ - prefix_), skip_special_);
  std::string after = tokenizer_.decode_raw(all.subspan(prefix_), skip_special_);
  if (after.size() <= before.size() || after.compare(0, before.size(), before) != 0) return {};
  std::string_view delta = std::string_view(after).substr(before.size());
  if (utf8_complete_prefix(delta) != delta.size()) return {};  // hold a partial character
  prefix_ = read_;
  read_ = ids_.size();
  // Keep the window small: drop ids nobody will look at again.
  if (prefix_ > 64) {
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
    read_ -= prefix_;
    prefix_ = 0;
  }
  return utf8_lossy(delta);
}

std::string StreamingDetokenizer::flush() {
  std::span<const int32_t> all(ids_);
  std::string before = tokenizer_.decode_raw(all.subspan(prefix_, read_ - prefix_), skip_special_);
  std::string after = tokenizer_.decode_raw(all.subspan(prefix_), skip_special_);
  prefix_ = read_ = ids_.size();
  if (after.size() <= before.size() || after.compare(0, before.size(), before) != 0) return {};
  return utf8_lossy(std::string_view(after).substr(before.size()));
}

}  // namespace tandem::tok
