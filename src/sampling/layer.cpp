#include "sampling/layer.h"

namespace tandem::sampling {

const char* layer_name() { return "sampling"; }

}  // namespace tandem::sampling
