// The trial template of a managed study (v1::TrialTemplate): what a trial runs, in one room
// below the study core (which validates it at CreateStudy) and the scheduler (which expands it
// for each trial and picks its runner). Pure functions; no process, no I/O.
//
// A template's args may hold `${name}`: a parameter of the study (at any depth of its
// conditional tree) or one of trial, trial_id, study, checkpoint_dir; `$${` is a literal `${`,
// and every other `$` stays as it is (a shell script's `$1`, `$$` or `$HOME` pass through).
// The resume rule: a trial that runs again (after a preemption or a restart) resumes from its
// checkpoint, keeping its measurements, only if its args use ${checkpoint_dir}; otherwise it
// starts from scratch, and so does its history (no mixing of two runs' steps).
#ifndef EVOSCALE_SERVICE_TRIAL_TEMPLATE_TRIAL_TEMPLATE_H_
#define EVOSCALE_SERVICE_TRIAL_TEMPLATE_TRIAL_TEMPLATE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "evoscale/v1/study.pb.h"

namespace evoscale::service {

// TrialTemplate.runner: "" or "local" (child processes of evoscaled), "slurm" (batch jobs).
enum class Runner { kLocal, kSlurm };

// The runner a template names ("" is local). INVALID_ARGUMENT naming
// spec.trial_template.runner for any other name.
absl::StatusOr<Runner> RunnerOf(const v1::TrialTemplate& t);

// CreateStudy's checks of spec.trial_template: a managed study (one with a command) has a known
// runner (Slurm placement only with runner "slurm", shell names for its env there), valid env
// names, parallel_trials in [0, 1000], processes in [0, 1024] and only known ${name}s in its
// args; without a command, no args, env or parallel_trials. INVALID_ARGUMENT naming the field.
absl::Status ValidateTrialTemplate(const v1::StudySpec& spec);

// The names a template's ${name} may use (each mapped to ""): every parameter at any depth,
// and trial, trial_id, study, checkpoint_dir.
std::map<std::string, std::string> TemplateNames(const v1::StudySpec& spec);

// One trial's values of those names: its parameters (a double in the shortest text that reads
// back as the same double), its name and id, the study's name and `checkpoint_dir`. A
// conditional parameter the trial does not have has no value.
std::map<std::string, std::string> TemplateValues(const v1::Study& study, const v1::Trial& trial,
                                                  const std::string& checkpoint_dir);

// Expands `${name}` in each argument with values[name] (the header comment's syntax).
// INVALID_ARGUMENT naming the argument for an unknown name or an unclosed `${`.
absl::StatusOr<std::vector<std::string>> ExpandArgs(
    const std::vector<std::string>& args, const std::map<std::string, std::string>& values);

// The resume rule (the header comment).
bool ResumesFromCheckpoint(const v1::TrialTemplate& t);

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_TRIAL_TEMPLATE_TRIAL_TEMPLATE_H_
