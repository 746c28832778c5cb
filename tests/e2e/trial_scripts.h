// Trial templates the e2e tests run as managed trials.
#ifndef EVOSCALE_TESTS_E2E_TRIAL_SCRIPTS_H_
#define EVOSCALE_TESTS_E2E_TRIAL_SCRIPTS_H_

#include <fstream>
#include <string>

#include "evoscale/v1/study.pb.h"

namespace evoscale::testing {

// A trial that hangs on its first run (after writing its pid to `pid_file`) and finishes with
// loss 1 on every later run; each run appends a line to `runs_file`.
inline void HangOnceThenFinish(const std::string& pid_file, const std::string& runs_file,
                               v1::TrialTemplate* t) {
  t->set_command("/bin/sh");
  t->add_args("-c");
  t->add_args("echo run >> '" + runs_file + "'; if [ -e '" + pid_file +
              "' ]; then echo '{\"event\":\"final\",\"metrics\":{\"loss\":1}}'; "
              "else echo $$ > '" + pid_file + "'; exec sleep 300; fi");
}

// The pid HangOnceThenFinish's first run wrote (0 before it did).
inline int ReadPid(const std::string& pid_file) {
  std::ifstream in(pid_file);
  int pid = 0;
  in >> pid;
  return pid;
}

// Lines in a file (0 when it does not exist).
inline int CountLines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

}  // namespace evoscale::testing

#endif  // EVOSCALE_TESTS_E2E_TRIAL_SCRIPTS_H_
