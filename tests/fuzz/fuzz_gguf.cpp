// Fuzz target: a GGUF file image -> GgufFile::parse (header, every metadata
// value type, nested arrays, tensor infos, alignment, offsets, overlaps), then
// what the loader derives from it: the config (gguf_config), the checkpoint's
// views (gguf_checkpoint) and the text side (tokenizer from tokenizer.ggml.*,
// chat template, stop ids). Every accepted tensor must lie inside the image;
// an accepted tokenizer encodes and decodes a fixed string.
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "core/log.h"
#include "model/gguf_model.h"
#include "runtime/gguf_text_side.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // the text side logs unusable templates; not a finding
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  auto f = model::GgufFile::parse(data, size, "fuzz.gguf");
  if (!f.ok()) return 0;
  uint64_t sum = 0;
  for (const auto& t : f->tensors()) {
    if (t.data < data || t.bytes > size || t.data + t.bytes > data + size) std::abort();
    sum += t.data[0] + t.data[t.bytes - 1];  // ASan checks the bounds
  }
  auto file = std::make_shared<const model::GgufFile>(std::move(*f));
  auto config = model::gguf_config(*file);
  if (config.ok()) {
    auto checkpoint = model::gguf_checkpoint(file, *config);
    if (checkpoint.ok()) sum += checkpoint->tensor_count();
  }
  auto vocab = runtime::gguf_vocab(*file);
  if (vocab.ok() && vocab->has_value()) {
    auto tokenizer = tok::tokenizer_from_gguf(**vocab, "fuzz.gguf");
    if (tokenizer.ok()) {
      const auto ids = tokenizer->encode("Hello, wörld! 123 <s>", true);
      sum += tokenizer->decode(ids, false).size();
    }
  }
  model::ModelConfig fallback;
  auto text = runtime::load_gguf_text_side(*file, config.ok() ? *config : fallback);
  if (text.ok()) sum += text->stop_tokens.size();
  return static_cast<int>(sum & 0);
}
