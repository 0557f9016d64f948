// kernel_trace.cpp — libtandem_kernel_trace.so, a preloaded timeline recorder
// for the GPU forward (a diagnostic; nothing in tandem links it).
//
//   TANDEM_KERNEL_TRACE=out.csv LD_PRELOAD=libtandem_kernel_trace.so \
//     tandem bench -m MODEL --device cuda -p 16 -n 64 -r 1
//
// Nsight Systems is not on the lent GPU machine and ncu serialises kernels
// (so it cannot show what programmatic dependent launch overlaps). This
// library turns on CUPTI's concurrent-kernel activity records when it is
// loaded and, at exit, writes one CSV line per kernel executed — graph
// replays included — with the GPU's own start/end timestamps, and one per
// host<->device copy (name "memcpy HtoD" / "memcpy DtoH" / "memcpy DtoD",
// grid = bytes), which shows what the GPU waits on between decode steps:
//   name,start_ns,end_ns,correlation,graph,node,grid,block,smem
// bench/cuda/trace_summary.py turns it into a per-step, per-kernel table of
// durations and of the time each kernel adds to the step's critical path.
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Record {
  std::string name;
  uint64_t start, end;
  uint32_t correlation, graph;
  uint64_t node;
  int32_t grid, block, smem;
};

std::mutex records_mutex;
std::vector<Record>* records = nullptr;  // leaked: read by the atexit handler

constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::lock_guard<std::mutex> lock(records_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      const char* kind = c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "memcpy HtoD"
                         : c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "memcpy DtoH"
                         : c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "memcpy DtoD"
                                                                          : "memcpy other";
      records->push_back(Record{kind, c->start, c->end, c->correlationId, c->graphId, c->graphNodeId,
                                static_cast<int32_t>(c->bytes), 0, 0});
      continue;
    }
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    records->push_back(Record{k->name != nullptr ? k->name : "?", k->start, k->end, k->correlationId,
                              k->graphId, k->graphNodeId, k->gridX * k->gridY * k->gridZ,
                              k->blockX * k->blockY * k->blockZ,
                              k->staticSharedMemory + k->dynamicSharedMemory});
  }
  std::free(buffer);
}

void write_trace() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  {
    // A process that ran no kernel (e.g. `timeout` around tandem, which
    // inherits LD_PRELOAD) leaves the file to the one that did.
    std::lock_guard<std::mutex> lock(records_mutex);
    if (records->empty()) return;
  }
  const char* path = std::getenv("TANDEM_KERNEL_TRACE");
  std::FILE* f = std::fopen(path != nullptr && *path != '\0' ? path : "kernel_trace.csv", "w");
  if (f == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  std::lock_guard<std::mutex> lock(records_mutex);
  std::fprintf(f, "name,start_ns,end_ns,correlation,graph,node,grid,block,smem\n");
  for (const Record& r : *records)
    std::fprintf(f, "%s,%llu,%llu,%u,%u,%llu,%d,%d,%d\n", r.name.c_str(),
                 static_cast<unsigned long long>(r.start), static_cast<unsigned long long>(r.end),
                 r.correlation, r.graph, static_cast<unsigned long long>(r.node), r.grid, r.block, r.smem);
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu kernels and copies\n", records->size());
}

__attribute__((constructor)) void start_trace() {
  records = new std::vector<Record>();
  records->reserve(1 << 20);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI could not be enabled\n");
    return;
  }
  std::atexit(write_trace);
}

}  // namespace
