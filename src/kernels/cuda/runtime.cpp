// runtime.cpp — devices, streams and device buffers over the CUDA runtime
// (kernels/cuda_ops.h). Every runtime call's error comes back as a Status.
#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return count;
}

Status set_device(int device) {
  return cuda_status(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

// ---------------------------------------------------------------- programmatic launch

namespace {

// -1: not yet read from TANDEM_CUDA_PDL; else 0 / 1.
std::atomic<int> pdl_allowed{-1};
// Per device: 0 not yet queried, 1 below sm_90, 2 sm_90 or later (it cannot change).
std::atomic<int> sm90_support[64];

bool pdl_allowed_now() {
  int v = pdl_allowed.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* e = std::getenv("TANDEM_CUDA_PDL");
    v = e != nullptr && std::string(e) == "0" ? 0 : 1;
    int expected = -1;
    if (!pdl_allowed.compare_exchange_strong(expected, v, std::memory_order_relaxed)) v = expected;
  }
  return v == 1;
}

}  // namespace

bool current_device_sm90() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) {
    cudaGetLastError();
    return false;
  }
  int support = sm90_support[device].load(std::memory_order_relaxed);
  if (support == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
      cudaGetLastError();
      major = 0;
    }
    support = major >= 9 ? 2 : 1;
    sm90_support[device].store(support, std::memory_order_relaxed);
  }
  return support == 2;
}

int current_multiprocessors() {
  static std::atomic<int> cached[64];  // zero-initialised (static storage)
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 132;
  }
  if (device >= 0 && device < 64 && (count = cached[device].load(std::memory_order_relaxed)) > 0)
    return count;
  if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 132;
  }
  if (device >= 0 && device < 64) cached[device].store(count, std::memory_order_relaxed);
  return count;
}

bool programmatic_launch_enabled() { return pdl_allowed_now() && current_device_sm90(); }

void set_programmatic_launch(bool allowed) { pdl_allowed.store(allowed ? 1 : 0, std::memory_order_relaxed); }

// ---------------------------------------------------------------- Stream

Expected<Stream> Stream::create() {
  cudaStream_t handle = nullptr;
  TANDEM_RETURN_IF_ERROR(
      cuda_status(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  Stream stream;
  stream.handle_ = handle;
  return stream;
}

Stream::Stream(Stream&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cudaStreamDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  if (handle_ != nullptr) cudaStreamDestroy(handle_);
}

Status Stream::synchronize() const {
  return cuda_status(cudaStreamSynchronize(handle_), "cudaStreamSynchronize");
}

// ---------------------------------------------------------------- Event

Expected<Event> Event::create() {
  cudaEvent_t handle = nullptr;
  TANDEM_RETURN_IF_ERROR(
      cuda_status(cudaEventCreateWithFlags(&handle, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
  Event event;
  event.handle_ = handle;
  return event;
}

Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cudaEventDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (handle_ != nullptr) cudaEventDestroy(handle_);
}

Status Event::record(const Stream& stream) {
  return cuda_status(cudaEventRecord(handle_, stream.handle()), "cudaEventRecord");
}

Status Event::synchronize() const {
  return cuda_status(cudaEventSynchronize(handle_), "cudaEventSynchronize");
}

// ---------------------------------------------------------------- Graph

Status Graph::begin_capture(const Stream& stream) {
  return cuda_status(cudaStreamBeginCapture(stream.handle(), cudaStreamCaptureModeRelaxed),
                     "cudaStreamBeginCapture");
}

Expected<Graph> Graph::end_capture(const Stream& stream) {
  cudaGraph_t graph = nullptr;
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaStreamEndCapture(stream.handle(), &graph), "cudaStreamEndCapture"));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  TANDEM_RETURN_IF_ERROR(cuda_status(err, "cudaGraphInstantiate"));
  Graph out;
  out.exec_ = exec;
  return out;
}

Graph::Graph(Graph&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

Graph::~Graph() {
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
}

Status Graph::launch(const Stream& stream) const {
  return cuda_status(cudaGraphLaunch(exec_, stream.handle()), "cudaGraphLaunch");
}

// ---------------------------------------------------------------- DeviceBuffer

Expected<DeviceBuffer> DeviceBuffer::allocate(size_t bytes) {
  DeviceBuffer buffer;
  if (bytes == 0) return buffer;
  void* data = nullptr;
  TANDEM_RETURN_IF_ERROR(
      cuda_status(cudaMalloc(&data, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes)"));
  buffer.data_ = data;
  buffer.bytes_ = bytes;
  return buffer;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

namespace {

Status check_range(size_t offset, size_t bytes, size_t size, const char* what) {
  if (offset > size || bytes > size - offset) {
    return invalid_argument(std::string(what) + ": range [" + std::to_string(offset) + ", +" +
                            std::to_string(bytes) + ") outside a buffer of " + std::to_string(size) +
                            " bytes");
  }
  return Status::Ok();
}

}  // namespace

Status DeviceBuffer::upload(const void* host, size_t bytes, const Stream& stream, size_t offset) {
  TANDEM_RETURN_IF_ERROR(check_range(offset, bytes, bytes_, "DeviceBuffer::upload"));
  if (bytes == 0) return Status::Ok();
  return cuda_status(cudaMemcpyAsync(static_cast<char*>(data_) + offset, host, bytes, cudaMemcpyHostToDevice,
                                     stream.handle()),
                     "cudaMemcpyAsync(host to device, " + std::to_string(bytes) + " bytes)");
}

Status DeviceBuffer::download(void* host, size_t bytes, const Stream& stream, size_t offset) const {
  TANDEM_RETURN_IF_ERROR(check_range(offset, bytes, bytes_, "DeviceBuffer::download"));
  if (bytes == 0) return Status::Ok();
  TANDEM_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(host, static_cast<const char*>(data_) + offset, bytes,
                                                     cudaMemcpyDeviceToHost, stream.handle()),
                                     "cudaMemcpyAsync(device to host, " + std::to_string(bytes) + " bytes)"));
  return stream.synchronize();
}

Status DeviceBuffer::fill_bytes(uint8_t value, const Stream& stream) {
  if (bytes_ == 0) return Status::Ok();
  return cuda_status(cudaMemsetAsync(data_, value, bytes_, stream.handle()), "cudaMemsetAsync");
}

Status copy_async(const Stream& stream, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream.handle()),
                     "cudaMemcpyAsync(" + std::to_string(bytes) + " bytes)");
}

}  // namespace tandem::kernels::gpu
