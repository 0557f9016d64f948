#include "spec/layer.h"

namespace tandem::spec {

const char* layer_name() { return "spec"; }

}  // namespace tandem::spec
