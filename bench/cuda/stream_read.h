// stream_read.h — launch the read-bandwidth kernel (stream_read.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace tandem::bench {

// Floats the sink buffer needs for launch_stream_read (one per thread).
int read_sink_floats(int multiprocessors);
// Reads `bytes` (a multiple of 16) of device memory once.
cudaError_t launch_stream_read(const void* data, size_t bytes, float* sink, int multiprocessors,
                               cudaStream_t stream);

}  // namespace tandem::bench
