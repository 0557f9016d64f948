#include "tokenizer/layer.h"

namespace tandem::tokenizer {

const char* layer_name() { return "tokenizer"; }

}  // namespace tandem::tokenizer
