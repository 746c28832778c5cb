// The text Slurm's tools print about a job, parsed: one record of `KEY=VALUE` words, as
// `scontrol show job --oneliner` prints it and as jobcomp/filetxt writes each finished job.
#ifndef EVOSCALE_TRAINER_ADAPTER_INTERNAL_SLURM_TEXT_H_
#define EVOSCALE_TRAINER_ADAPTER_INTERNAL_SLURM_TEXT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace evoscale::trainer_adapter::internal {

// "JobId=7 JobName=a b UserId=root(0)" -> {JobId: 7, JobName: "a b", UserId: "root(0)"}: a
// word without '=' belongs to the value before it (values may hold spaces). The first of a
// repeated key wins. Words before the first KEY= are dropped.
std::map<std::string, std::string> ParseSlurmRecord(absl::string_view line);

// The records of jobcomp/filetxt's file (one line per finished job) whose JobId is `job_id`;
// the last one is the job's latest end (a requeued job ends more than once).
std::vector<std::map<std::string, std::string>> JobCompRecords(absl::string_view file,
                                                               absl::string_view job_id);

// Slurm's memory sizes as `scontrol show job` prints them (MinMemoryNode=100M, 2G, 1024K,
// 512): bytes. INVALID_ARGUMENT for anything else.
absl::StatusOr<int64_t> ParseSlurmMemory(absl::string_view text);

}  // namespace evoscale::trainer_adapter::internal

#endif  // EVOSCALE_TRAINER_ADAPTER_INTERNAL_SLURM_TEXT_H_
