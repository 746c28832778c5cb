#include "service/internal/forwarder.h"

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace evoscale::service::internal {

v1::StudyService::Stub* StudyForwarder::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<v1::StudyService::Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    stub = v1::StudyService::NewStub(grpc::CreateChannel(address, credentials_));
  }
  return stub.get();
}

}  // namespace evoscale::service::internal
