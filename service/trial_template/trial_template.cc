#include "service/trial_template/trial_template.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace evoscale::service {
namespace {

using ::absl::InvalidArgumentError;
using ::absl::StrCat;
using ::absl::StrFormat;

// Shortest text that reads back as the same double.
std::string DoubleText(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : StrCat(v);
}

}  // namespace

absl::StatusOr<Runner> RunnerOf(const v1::TrialTemplate& t) {
  if (t.runner().empty() || t.runner() == "local") return Runner::kLocal;
  if (t.runner() == "slurm") return Runner::kSlurm;
  return InvalidArgumentError(
      StrFormat("spec.trial_template.runner: \"%s\" is not local or slurm", t.runner()));
}

namespace {

void CollectParameterName(const v1::ParameterSpec& p, std::map<std::string, std::string>* names) {
  (*names)[p.name()] = "";
  for (const auto& child : p.children()) CollectParameterName(child.parameter_spec(), names);
}

}  // namespace

std::map<std::string, std::string> TemplateNames(const v1::StudySpec& spec) {
  std::map<std::string, std::string> names = {
      {"trial", ""}, {"trial_id", ""}, {"study", ""}, {"checkpoint_dir", ""}};
  for (const v1::ParameterSpec& p : spec.parameters()) CollectParameterName(p, &names);
  return names;
}

namespace {

// TrialTemplate.runner and .slurm.
absl::Status ValidateRunner(const v1::TrialTemplate& t) {
  absl::StatusOr<Runner> runner = RunnerOf(t);
  if (!runner.ok()) return runner.status();
  if (*runner != Runner::kSlurm) {
    if (t.has_slurm()) {
      return InvalidArgumentError(
          "spec.trial_template.slurm: set, but the runner is not \"slurm\"");
    }
    return absl::OkStatus();
  }
  if (t.command().empty()) {
    return InvalidArgumentError(
        "spec.trial_template.runner: \"slurm\" needs a command (a managed study)");
  }
  const v1::SlurmPlacement& slurm = t.slurm();
  for (const auto& [field, value] :
       {std::pair{"partition", slurm.partition()}, std::pair{"account", slurm.account()}}) {
    if (value.size() > 256 || value.find_first_of(" \t\n,=") != std::string::npos) {
      return InvalidArgumentError(
          StrFormat("spec.trial_template.slurm.%s: \"%s\" is not a Slurm name", field, value));
    }
  }
  for (int i = 0; i < slurm.extra_args_size(); ++i) {
    const std::string& arg = slurm.extra_args(i);
    if (arg.size() < 2 || arg[0] != '-' || arg.find('\n') != std::string::npos) {
      return InvalidArgumentError(StrFormat(
          "spec.trial_template.slurm.extra_args[%d]: \"%s\" is not an sbatch option "
          "(\"--name=value\" or \"-x\")",
          i, arg));
    }
  }
  // The batch script exports each variable: names must be shell names.
  for (const auto& [k, v] : t.env()) {
    const bool shell_name =
        !k.empty() && !absl::ascii_isdigit(static_cast<unsigned char>(k[0])) &&
        std::all_of(k.begin(), k.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
    if (!shell_name) {
      return InvalidArgumentError(StrFormat(
          "spec.trial_template.env: \"%s\" is not a shell variable name (runner slurm)", k));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrialTemplate(const v1::StudySpec& spec) {
  const v1::TrialTemplate& t = spec.trial_template();
  if (absl::Status st = ValidateRunner(t); !st.ok()) return st;
  if (t.parallel_trials() < 0 || t.parallel_trials() > 1000) {
    return InvalidArgumentError(StrFormat(
        "spec.trial_template.parallel_trials: %d must be in [0, 1000]", t.parallel_trials()));
  }
  if (t.processes() < 0 || t.processes() > 1024) {
    return InvalidArgumentError(StrFormat(
        "spec.trial_template.processes: %d must be in [0, 1024]", t.processes()));
  }
  if (t.command().empty()) {
    if (t.args_size() > 0 || t.env_size() > 0 || t.parallel_trials() > 0) {
      return InvalidArgumentError(
          "spec.trial_template.command: empty, but args, env or parallel_trials are set "
          "(a managed study needs a command)");
    }
    return absl::OkStatus();
  }
  if (t.command().size() > 4096) {
    return InvalidArgumentError("spec.trial_template.command: longer than 4096 bytes");
  }
  for (const auto& [k, v] : t.env()) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) {
      return InvalidArgumentError(
          StrFormat("spec.trial_template.env: bad variable name \"%s\"", k));
    }
  }
  // Every ${name} must name a parameter (at any depth) or trial, trial_id, study, checkpoint_dir.
  std::vector<std::string> args(t.args().begin(), t.args().end());
  absl::StatusOr<std::vector<std::string>> expanded =
      ExpandArgs(args, TemplateNames(spec));
  if (!expanded.ok()) {
    return InvalidArgumentError(
        StrCat("spec.trial_template.", expanded.status().message(),
               " (names: the parameters, trial, trial_id, study, checkpoint_dir)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ExpandArgs(
    const std::vector<std::string>& args, const std::map<std::string, std::string>& values) {
  std::vector<std::string> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string r;
    for (size_t p = 0; p < a.size();) {
      if (a[p] != '$') {
        r.push_back(a[p++]);
        continue;
      }
      if (a.compare(p, 3, "$${") == 0) {  // an escaped "${"
        r += "${";
        p += 3;
        continue;
      }
      if (p + 1 < a.size() && a[p + 1] == '{') {
        const size_t close = a.find('}', p + 2);
        if (close == std::string::npos) {
          return InvalidArgumentError(
              StrCat("args[", i, "] \"", a, "\": unclosed \"${\""));
        }
        const std::string name = a.substr(p + 2, close - p - 2);
        auto it = values.find(name);
        if (it == values.end()) {
          return InvalidArgumentError(
              StrCat("args[", i, "] \"", a, "\": unknown name \"", name, "\""));
        }
        r += it->second;
        p = close + 1;
        continue;
      }
      r.push_back(a[p++]);  // any other '$' (shell's $1, $$, $HOME) stays as it is
    }
    out.push_back(std::move(r));
  }
  return out;
}


std::map<std::string, std::string> TemplateValues(const v1::Study& study, const v1::Trial& trial,
                                                  const std::string& checkpoint_dir) {
  std::map<std::string, std::string> values = {{"trial", trial.name()},
                                                {"trial_id", StrCat(trial.id())},
                                                {"study", study.name()},
                                                {"checkpoint_dir", checkpoint_dir}};
  for (const v1::Parameter& p : trial.parameters()) {
    switch (p.value_case()) {
      case v1::Parameter::kDoubleValue:
        values[p.name()] = DoubleText(p.double_value());
        break;
      case v1::Parameter::kIntValue:
        values[p.name()] = StrCat(p.int_value());
        break;
      case v1::Parameter::kStringValue:
        values[p.name()] = p.string_value();
        break;
      default:
        break;
    }
  }
  return values;
}

bool ResumesFromCheckpoint(const v1::TrialTemplate& t) {
  return std::any_of(t.args().begin(), t.args().end(), [](const std::string& arg) {
    return absl::StrContains(arg, "${checkpoint_dir}");
  });
}

}  // namespace evoscale::service
