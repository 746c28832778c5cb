#include "trainer/cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "trainer/cuda/dl_symbols.h"

namespace evoscale::trainer::cuda {
namespace {

absl::StatusOr<CublasApi> Open() {
  const std::string soname = absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR);
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
#ifdef EVOSCALE_CUBLAS_LIBRARY
  if (lib == nullptr) lib = dlopen(EVOSCALE_CUBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
#endif
  if (lib == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", soname, " (cuBLAS): ", dlerror()));
  }
  // Never closed: handles created from it live until exit.
  DlSymbols symbols(lib);
  CublasApi api;
  symbols.Bind(api.create, "cublasCreate_v2");
  symbols.Bind(api.destroy, "cublasDestroy_v2");
  symbols.Bind(api.set_stream, "cublasSetStream_v2");
  symbols.Bind(api.set_math_mode, "cublasSetMathMode");
  symbols.Bind(api.sgemm, "cublasSgemm_v2");
  symbols.Bind(api.sgemv, "cublasSgemv_v2");
  symbols.Bind(api.status_name, "cublasGetStatusName");
  symbols.Bind(api.status_string, "cublasGetStatusString");
  if (!symbols.missing().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(soname, " lacks ", symbols.missing()));
  }
  return api;
}

}  // namespace

absl::StatusOr<const CublasApi*> Cublas() {
  static const absl::StatusOr<CublasApi>* const api = new absl::StatusOr<CublasApi>(Open());
  if (!api->ok()) return api->status();
  return &**api;
}

}  // namespace evoscale::trainer::cuda
