// Entry points of a library opened with dlopen (cuBLAS, NCCL: opened at run time, so CPU-only
// runs of a CUDA build load neither): binds each by name and keeps the names it did not find.
#ifndef EVOSCALE_TRAINER_CUDA_DL_SYMBOLS_H_
#define EVOSCALE_TRAINER_CUDA_DL_SYMBOLS_H_

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace evoscale::trainer::cuda {

class DlSymbols {
 public:
  explicit DlSymbols(void* library) : library_(library) {}

  // fn = the library's `name`, or nullptr (and `name` joins missing()).
  template <typename Fn>
  void Bind(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(dlsym(library_, name));
    if (fn == nullptr) absl::StrAppend(&missing_, missing_.empty() ? "" : ", ", name);
  }
  // The names not found, comma-separated; empty when every one was.
  const std::string& missing() const { return missing_; }

 private:
  void* const library_;
  std::string missing_;
};

}  // namespace evoscale::trainer::cuda

#endif  // EVOSCALE_TRAINER_CUDA_DL_SYMBOLS_H_
