#include "scheduler/layer.h"

namespace tandem::scheduler {

const char* layer_name() { return "scheduler"; }

}  // namespace tandem::scheduler
