// The evoscale command line, parsed: what ParseCommandLine() (cli.h) fills and every command
// reads. Plain values, no behaviour; cli.h includes this header, which is part of its contract.

#ifndef EVOSCALE_SERVICE_CLI_COMMAND_LINE_H_
#define EVOSCALE_SERVICE_CLI_COMMAND_LINE_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "evoscale/v1/autoscaler.pb.h"
#include "evoscale/v1/study.pb.h"
#include "load_model/replay.h"
#include "placement/replay.h"
#include "service/cli/kubernetes.h"

namespace evoscale::cli {

inline constexpr char kDefaultServer[] = "127.0.0.1:50051";
inline constexpr double kDefaultTimeoutSeconds = 10.0;

// What the program takes from its surroundings. Main() fills it from the process
// (EVOSCALE_SERVER, EVOSCALE_TOKEN, gethostname(), getpid(), a random nonce); tests build one
// by hand.
struct Environment {
  std::string server;    // $EVOSCALE_SERVER; empty = unset
  std::string token;     // $EVOSCALE_TOKEN; empty = unset
  std::string tls_ca;    // $EVOSCALE_TLS_CA; empty = unset
  std::string hostname;  // these three make the default client id (DefaultClientId)
  int64_t pid = 0;
  std::string nonce;
};

// Flags that apply to every command. They may appear anywhere on the command line.
struct GlobalOptions {
  std::string server = kDefaultServer;  // --server, else $EVOSCALE_SERVER
  std::string token;                    // --token, else $EVOSCALE_TOKEN; empty = send none
  // --tls-ca (else $EVOSCALE_TLS_CA): connect with TLS, trusting this PEM CA; --tls-cert and
  // --tls-key: this client's certificate, for a server that asks for one (mutual TLS).
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // -o/--output: "table" (readable text), "json" (protobuf JSON, one message a line; --json
  // is short for it), "yaml" (the same fields as YAML documents), or "kubernetes" (recommend
  // only: a VerticalPodAutoscaler and a KEDA ScaledObject).
  std::string output = "table";
  bool version = false;  // --version
  bool structured() const { return output == "json" || output == "yaml"; }
  double timeout_seconds = kDefaultTimeoutSeconds;  // --timeout: deadline of each RPC
};

// The positional arguments and flags of the commands (see UsageText()). Each command fills
// only its own fields; the others keep their defaults.
struct CommandArguments {
  // Positional arguments, as given: STUDY ("studies/7" or "7"), TRIAL ("studies/7/trials/3"),
  // NAME or WORKLOAD ("default/ranker"), the STATE of `study state`, and the METRIC=VALUE...
  // of measure and complete.
  std::string study;
  std::string trial;
  std::string workload;
  v1::Study::State study_state = v1::Study::STATE_UNSPECIFIED;
  std::vector<std::string> metrics;

  // study create -f/--file and --name (unset: the file's display name).
  std::string file;
  std::optional<std::string> display_name;
  // trials list --state (unspecified: every state) and --page-size (0: the server's default).
  v1::Trial::State trial_state = v1::Trial::STATE_UNSPECIFIED;
  int32_t page_size = 0;
  // suggest --count and --client-id (empty: DefaultClientId()).
  int32_t count = 1;
  std::string client_id;
  // measure --step.
  int64_t step = 0;
  // complete --infeasible.
  std::optional<std::string> infeasible_reason;
  // The settings `workload put` was given (--policy, --kind, ..., --startup-delay-seconds).
  v1::Workload workload_settings;
  // The flags of `workload put` given on the line: only these change an existing workload.
  std::set<std::string> workload_flags;
  // recommend --prometheus-url (for -o kubernetes).
  KubernetesOptions kubernetes;
  // replay --trace, --path, --policy and --startup-delay.
  load_model::ReplayOptions replay;
  // place --pods, --nodes, --policy, --seed, --tune; --departures with --no-preemption and
  // --fifo (departures: the policy and seed are copied from `options`).
  struct Place {
    std::string pods;
    std::string nodes;
    placement::PlacementReplayOptions options;
    bool departures = false;
    bool no_preemption = false;
    bool fifo = false;
    bool secondary_given = false;
  } place;
};

// A command line, parsed.
struct CommandLine {
  GlobalOptions global;
  std::string command;  // the command's words, "study create"; empty: none was given
  CommandArguments arguments;
  std::string help;  // what -h/--help or `help` asked to print; empty: run the command
};

}  // namespace evoscale::cli

#endif  // EVOSCALE_SERVICE_CLI_COMMAND_LINE_H_
