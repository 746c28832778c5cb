#include "trainer/model_sink.h"

#include <utility>

namespace evoscale::trainer {
namespace {

ModelSinkFactory& Factory() {
  static ModelSinkFactory* factory = new ModelSinkFactory();
  return *factory;
}

}  // namespace

bool RegisterModelSinkFactory(ModelSinkFactory factory) {
  Factory() = std::move(factory);
  return true;
}

absl::StatusOr<std::unique_ptr<ModelSink>> ConnectModelSink(const std::string& address,
                                                            const std::string& source) {
  if (!Factory()) {
    return absl::FailedPreconditionError(
        "--serve: this trainer was built without evoscale-serve's client");
  }
  return Factory()(address, source);
}

}  // namespace evoscale::trainer
