// Fuzz target: tokenizer.json text -> Tokenizer::from_json; an accepted
// tokenizer then encodes and decodes a few fixed strings and the input's own
// last bytes (arbitrary, possibly invalid UTF-8), and round-trips ids.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = tandem::tok::Tokenizer::from_json(text, "fuzz/tokenizer.json");
  if (!t.ok()) return 0;
  const std::string_view tail = text.substr(size - std::min<size_t>(size, 64));
  for (std::string_view s :
       {std::string_view("Hello, world! 123  \n\t<s> x"), std::string_view("\xc3\xa9\xe2\x82"), tail}) {
    for (bool special : {false, true}) {
      std::vector<int32_t> ids = t->encode(s, special);
      (void)t->decode(ids, special);
      (void)t->decode_raw(ids, !special);
    }
  }
  const int32_t vocab = t->vocab_size();
  std::vector<int32_t> probe = {-1, 0, 1, vocab - 1, vocab, vocab + 1, INT32_MAX, INT32_MIN};
  (void)t->decode(probe, false);
  (void)t->decode_raw(probe, true);
  for (int32_t id : probe) {
    auto token = t->id_to_token(id);
    if (token) (void)t->token_to_id(*token);
    (void)t->is_special(id);
  }
  return 0;
}
