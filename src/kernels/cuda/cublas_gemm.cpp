// cublas_gemm.cpp — cuBLAS as the explicit non-invariant GEMM option
// (kernels/cuda_ops.h, CublasGemm), loaded with dlopen so no tandem binary
// links cuBLAS: y = x·Wᵀ with bf16 x and W, f32 output and f32 compute
// (cublasGemmEx, CUBLAS_COMPUTE_32F). cuBLAS picks its algorithm per shape
// (split-K included), so a row's bits may depend on M: this is never the
// default, and the exactness probe is what notices.
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

#include "cuda/cuda_check.h"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {

struct CublasGemm::Api {
  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using DestroyFn = cublasStatus_t (*)(cublasHandle_t);
  using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                      const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                      int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                      cublasGemmAlgo_t);
  void* lib = nullptr;
  cublasHandle_t handle = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  GemmExFn gemm_ex = nullptr;
};

Expected<CublasGemm> CublasGemm::open() {
  auto api = std::make_unique<Api>();
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    api->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (api->lib != nullptr) break;
  }
  if (api->lib == nullptr)
    return failed_precondition(
        "cuBLAS GEMM option: libcublas.so not found (dlopen; put its directory on "
        "LD_LIBRARY_PATH)");
  auto create = reinterpret_cast<Api::CreateFn>(dlsym(api->lib, "cublasCreate_v2"));
  api->destroy = reinterpret_cast<Api::DestroyFn>(dlsym(api->lib, "cublasDestroy_v2"));
  api->set_stream = reinterpret_cast<Api::SetStreamFn>(dlsym(api->lib, "cublasSetStream_v2"));
  api->gemm_ex = reinterpret_cast<Api::GemmExFn>(dlsym(api->lib, "cublasGemmEx"));
  CublasGemm out;
  if (!create || !api->destroy || !api->set_stream || !api->gemm_ex) {
    dlclose(api->lib);
    return failed_precondition("cuBLAS GEMM option: libcublas lacks cublasCreate_v2/cublasGemmEx");
  }
  if (create(&api->handle) != CUBLAS_STATUS_SUCCESS) {
    dlclose(api->lib);
    return internal_error("cuBLAS GEMM option: cublasCreate failed");
  }
  out.api_ = std::move(api);
  return out;
}

CublasGemm::CublasGemm() = default;
CublasGemm::CublasGemm(CublasGemm&&) noexcept = default;
CublasGemm& CublasGemm::operator=(CublasGemm&&) noexcept = default;

CublasGemm::~CublasGemm() {
  if (api_ && api_->handle != nullptr) api_->destroy(api_->handle);
  if (api_ && api_->lib != nullptr) dlclose(api_->lib);
}

Status CublasGemm::gemm(const Stream& stream, const uint16_t* x, int64_t m, const uint16_t* w, int64_t n,
                        int64_t k, float* y) const {
  if (!api_) return failed_precondition("CublasGemm: not open");
  if (m == 0) return Status::Ok();
  if (m < 0 || n <= 0 || k <= 0 || m > 0x7fffffff || n > 0x7fffffff || k > 0x7fffffff)
    return invalid_argument("CublasGemm: bad shape");
  if (api_->set_stream(api_->handle, stream.handle()) != CUBLAS_STATUS_SUCCESS)
    return internal_error("cublasSetStream failed");
  const float alpha = 1.0f, beta = 0.0f;
  // Column-major view: C (n x m) = op_T(W as k x n, lda k) · (x as k x m, ldb k), ldc n.
  const cublasStatus_t st = api_->gemm_ex(
      api_->handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
      &alpha, w, CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF, static_cast<int>(k), &beta, y, CUDA_R_32F,
      static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS)
    return internal_error("cublasGemmEx failed (status " + std::to_string(st) + ")");
  return Status::Ok();
}

}  // namespace tandem::kernels::gpu
