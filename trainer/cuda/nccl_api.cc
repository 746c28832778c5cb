#include "trainer/cuda/nccl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "trainer/cuda/dl_symbols.h"

namespace evoscale::trainer::cuda {
namespace {

constexpr char kSoname[] = "libnccl.so.2";

}  // namespace

absl::StatusOr<NcclApi> OpenNccl(const std::string& path) {
  void* lib = nullptr;
  std::string opened, tried;
  const auto try_open = [&](const std::string& name) {
    if (lib != nullptr) return;
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      opened = name;
    } else {
      absl::StrAppend(&tried, tried.empty() ? "" : "; ", dlerror());
    }
  };
  if (!path.empty()) {
    try_open(path);
    if (lib == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("EVOSCALE_NCCL_LIBRARY=\"", path, "\": cannot open it: ", tried));
    }
  } else {
    try_open(kSoname);
#ifdef EVOSCALE_NCCL_LIBRARY_PATH
    try_open(EVOSCALE_NCCL_LIBRARY_PATH);
#endif
    if (lib == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot open NCCL (", kSoname, "), which a GPU job of several processes needs: ", tried,
          ". Install it (NCCL ships apart from the CUDA toolkit; PyTorch's wheels carry one in "
          "nvidia/nccl/lib) or set EVOSCALE_NCCL_LIBRARY to its path"));
    }
  }
  DlSymbols symbols(lib);
  NcclApi api;
  symbols.Bind(api.get_version, "ncclGetVersion");
  symbols.Bind(api.get_unique_id, "ncclGetUniqueId");
  symbols.Bind(api.comm_init_rank, "ncclCommInitRank");
  symbols.Bind(api.comm_destroy, "ncclCommDestroy");
  symbols.Bind(api.comm_abort, "ncclCommAbort");
  symbols.Bind(api.comm_get_async_error, "ncclCommGetAsyncError");
  symbols.Bind(api.get_error_string, "ncclGetErrorString");
  symbols.Bind(api.get_last_error, "ncclGetLastError");
  symbols.Bind(api.group_start, "ncclGroupStart");
  symbols.Bind(api.group_end, "ncclGroupEnd");
  symbols.Bind(api.send, "ncclSend");
  symbols.Bind(api.recv, "ncclRecv");
  symbols.Bind(api.all_reduce, "ncclAllReduce");
  symbols.Bind(api.broadcast, "ncclBroadcast");
  if (!symbols.missing().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(opened, " lacks ", symbols.missing(), " (NCCL 2.12 or newer is needed)"));
  }
  api.path = opened;
  return api;
}

absl::StatusOr<const NcclApi*> Nccl() {
  static const absl::StatusOr<NcclApi>* const api = [] {
    const char* path = std::getenv("EVOSCALE_NCCL_LIBRARY");
    return new absl::StatusOr<NcclApi>(OpenNccl(path == nullptr ? "" : path));
  }();
  if (!api->ok()) return api->status();
  return &**api;
}

std::string NcclResultText(const NcclApi& api, ncclResult_t result) {
  static constexpr const char* kNames[] = {
      "ncclSuccess",         "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
      "ncclInvalidArgument", "ncclInvalidUsage",       "ncclRemoteError", "ncclInProgress"};
  const int r = int(result);
  std::string text =
      r >= 0 && r < int(std::size(kNames)) ? kNames[r] : absl::StrCat("ncclResult ", r);
  absl::StrAppend(&text, ": ", api.get_error_string(result));
  const char* last = api.get_last_error(nullptr);
  if (last != nullptr && *last != '\0') absl::StrAppend(&text, " (", last, ")");
  return text;
}

}  // namespace evoscale::trainer::cuda
