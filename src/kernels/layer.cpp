#include "kernels/layer.h"

namespace tandem::kernels {

const char* layer_name() { return "kernels"; }

}  // namespace tandem::kernels
