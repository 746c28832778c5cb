#include "trainer_adapter/internal/cgroup_files.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace evoscale::trainer_adapter::internal {
namespace {

// The folder of `path` (as /proc/self/cgroup names it) below the mount whose fstype is
// `fstype` and, for v1, whose options hold `controller`.
absl::StatusOr<std::string> MountedFolder(absl::string_view path, absl::string_view fstype,
                                          absl::string_view controller,
                                          absl::string_view mountinfo) {
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS"
    const size_t dash = line.find(" - ");
    if (dash == absl::string_view::npos) continue;
    std::vector<absl::string_view> head = absl::StrSplit(line.substr(0, dash), ' ');
    std::vector<absl::string_view> tail = absl::StrSplit(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3 || tail[0] != fstype) continue;
    if (!controller.empty()) {
      bool has = false;
      for (absl::string_view o : absl::StrSplit(tail[2], ',')) has = has || o == controller;
      if (!has) continue;
    }
    const absl::string_view root = head[3];
    absl::string_view relative = path;
    if (root != "/" && absl::StartsWith(relative, root)) relative.remove_prefix(root.size());
    std::string folder(head[4]);
    if (relative != "/" && !relative.empty()) absl::StrAppend(&folder, relative);
    return folder;
  }
  return absl::FailedPreconditionError(
      controller.empty()
          ? std::string("no cgroup2 file system is mounted here")
          : absl::StrCat("the cgroup v1 \"", controller, "\" hierarchy is not mounted here"));
}

}  // namespace

absl::StatusOr<std::string> V1GroupFolder(absl::string_view controller,
                                          absl::string_view proc_self_cgroup,
                                          absl::string_view mountinfo) {
  std::string path;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n')) {
    // "ID:controllers:path"
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3) continue;
    for (absl::string_view c : absl::StrSplit(parts[1], ',')) {
      if (c == controller) {
        path = std::string(parts[2]);
        found = true;
      }
    }
  }
  if (!found) {
    return absl::FailedPreconditionError(
        absl::StrCat("no cgroup v1 \"", controller, "\" hierarchy in /proc/self/cgroup"));
  }
  return MountedFolder(path, "cgroup", controller, mountinfo);
}

absl::StatusOr<std::string> V2GroupFolder(absl::string_view proc_self_cgroup,
                                          absl::string_view mountinfo) {
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n')) {
    // The unified hierarchy's line: "0::/path".
    if (absl::ConsumePrefix(&line, "0::")) return MountedFolder(line, "cgroup2", "", mountinfo);
  }
  return absl::FailedPreconditionError("no cgroup v2 group (\"0::/path\") in /proc/self/cgroup");
}

int64_t KeyedValue(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> kv = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t value = 0;
    if (kv.size() == 2 && kv[0] == key && absl::SimpleAtoi(kv[1], &value)) return value;
  }
  return -1;
}

int64_t NumberOrMax(absl::string_view text) {
  int64_t value = -1;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &value)) return -1;
  return value;
}

int64_t CpuMaxQuota(absl::string_view text) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  return parts.empty() ? -1 : NumberOrMax(parts[0]);
}

bool HasController(absl::string_view list, absl::string_view controller) {
  for (absl::string_view c : absl::StrSplit(list, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (c == controller) return true;
  }
  return false;
}

}  // namespace evoscale::trainer_adapter::internal
