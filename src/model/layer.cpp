#include "model/layer.h"

namespace tandem::model {

const char* layer_name() { return "model"; }

}  // namespace tandem::model
