// device_info.h — properties of the current CUDA device that kernels' launch
// choices read (internal to tandem_kernels_cuda). Queried once per device
// (they cannot change) and never a bit of any result.
#pragma once

namespace tandem::kernels::gpu {

// Whether the current device is sm_90 or later (programmatic launch, bulk copies).
bool current_device_sm90();
// Its multiprocessor count (132 if the runtime cannot say).
int current_multiprocessors();

}  // namespace tandem::kernels::gpu
