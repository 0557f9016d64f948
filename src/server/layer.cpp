#include "server/layer.h"

namespace tandem::server {

const char* layer_name() { return "server"; }

}  // namespace tandem::server
