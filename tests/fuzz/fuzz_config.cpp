// Fuzz target: config.json text -> parse_config. Any input must give a config
// or an error naming the file; an accepted config must be self-consistent.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = tandem::model::parse_config(text, "fuzz/config.json");
  if (!c.ok()) {
    if (c.status().message().find("fuzz/config.json") == std::string::npos) std::abort();
    return 0;
  }
  // What the loader relies on.
  if (c->num_layers <= 0 || c->num_heads <= 0 || c->num_kv_heads <= 0 || c->head_dim <= 0 ||
      c->head_dim % 2 != 0 || c->num_heads % c->num_kv_heads != 0 || c->vocab_size <= 0 ||
      c->hidden_size <= 0 || c->intermediate_size <= 0 || !(c->rms_norm_eps > 0) || !(c->rope_theta > 0) ||
      c->layer_window.size() != static_cast<size_t>(c->num_layers))
    std::abort();
  return 0;
}
