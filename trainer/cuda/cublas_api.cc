#include "trainer/cuda/cublas_api.h"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"

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
  std::string missing;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr) absl::StrAppend(&missing, missing.empty() ? "" : ", ", name);
  };
  CublasApi api;
  get(api.create, "cublasCreate_v2");
  get(api.destroy, "cublasDestroy_v2");
  get(api.set_stream, "cublasSetStream_v2");
  get(api.set_math_mode, "cublasSetMathMode");
  get(api.sgemm, "cublasSgemm_v2");
  get(api.sgemv, "cublasSgemv_v2");
  get(api.status_name, "cublasGetStatusName");
  get(api.status_string, "cublasGetStatusString");
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(soname, " lacks ", missing));
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
