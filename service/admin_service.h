// The gRPC AdminService: operating evoscaled (backups). Every call needs the ADMIN role.
#ifndef EVOSCALE_SERVICE_ADMIN_SERVICE_H_
#define EVOSCALE_SERVICE_ADMIN_SERVICE_H_

#include <string>

#include "evoscale/v1/admin.grpc.pb.h"
#include "service/auth.h"
#include "service/metrics.h"

namespace evoscale::service {

// Thread-safe. `auth` and `metrics` must outlive the service.
class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  AdminServiceImpl(std::string db_path, std::string telemetry_db_path, const TokenAuth* auth,
                   ServiceMetrics* metrics);

  grpc::ServerWriteReactor<v1::BackupChunk>* Backup(grpc::CallbackServerContext* ctx,
                                                    const v1::BackupRequest* req) override;

 private:
  const std::string db_path_;
  const std::string telemetry_db_path_;
  const TokenAuth* const auth_;
  ServiceMetrics* const metrics_;
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_ADMIN_SERVICE_H_
