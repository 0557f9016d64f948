// cublas_reference.h — cuBLAS as a reference (tests) and a yardstick
// (benchmarks), loaded at run time with dlopen so no tandem binary links
// cuBLAS: y = x·Wᵀ with bf16 x and W, f32 output, f32 compute
// (cublasGemmEx, CUBLAS_COMPUTE_32F). cuBLAS picks its own algorithm per
// shape (split-K included): it is NOT batch-invariant, which is why it is
// never on tandem's invariant path. Header-only; not thread-safe (one per thread).
#pragma once

#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

namespace tandem::kernels::gpu::testing {

class CublasReference {
 public:
  CublasReference() {
    for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
      lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib_ != nullptr) break;
    }
    if (lib_ == nullptr) {
      error_ = "libcublas.so not found (dlopen)";
      return;
    }
    create_ = reinterpret_cast<CreateFn>(dlsym(lib_, "cublasCreate_v2"));
    destroy_ = reinterpret_cast<DestroyFn>(dlsym(lib_, "cublasDestroy_v2"));
    set_stream_ = reinterpret_cast<SetStreamFn>(dlsym(lib_, "cublasSetStream_v2"));
    gemm_ex_ = reinterpret_cast<GemmExFn>(dlsym(lib_, "cublasGemmEx"));
    if (!create_ || !destroy_ || !set_stream_ || !gemm_ex_) {
      error_ = "libcublas lacks cublasCreate_v2/cublasGemmEx";
      return;
    }
    if (create_(&handle_) != CUBLAS_STATUS_SUCCESS) {
      handle_ = nullptr;
      error_ = "cublasCreate failed";
    }
  }
  ~CublasReference() {
    if (handle_ != nullptr) destroy_(handle_);
    if (lib_ != nullptr) dlclose(lib_);
  }
  CublasReference(const CublasReference&) = delete;
  CublasReference& operator=(const CublasReference&) = delete;

  bool ok() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }

  // y[m][n] = x[m][k] · w[n][k]ᵀ on `stream`. Column-major view: yᵀ (n×m) = Wᵀᵀ… i.e.
  // C(n×m) = op_T(A = W as k×n, lda k) · B (x as k×m, ldb k), ldc n.
  bool gemm_bf16(cudaStream_t stream, const void* x, int64_t m, const void* w, int64_t n, int64_t k,
                 float* y) {
    if (set_stream_(handle_, stream) != CUBLAS_STATUS_SUCCESS) return false;
    const float alpha = 1.0f, beta = 0.0f;
    return gemm_ex_(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                    static_cast<int>(k), &alpha, w, CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF,
                    static_cast<int>(k), &beta, y, CUDA_R_32F, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
  }

 private:
  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
  using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                      const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                      int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                      cublasGemmAlgo_t);
  void* lib_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  CreateFn create_ = nullptr;
  DestroyFn destroy_ = nullptr;
  SetStreamFn set_stream_ = nullptr;
  GemmExFn gemm_ex_ = nullptr;
  std::string error_;
};

}  // namespace tandem::kernels::gpu::testing
