// `trainqd`: one daemon process per state dir, with one event loop that owns all
// state (docs/architecture.md, "The daemon and its seams").
#pragma once

#include <string>

#include "src/os/state_paths.h"
#include "trainq/status.h"

namespace trainq {

struct DaemonOptions {
  StatePaths paths;
  bool log_to_stderr = true;
  // The umask each job's command runs with (RunSpec::umask): the one trainqd started with,
  // before it set 077 for its own files. -1: the shim's.
  int job_umask = -1;
  // `trainqd --shared` and `--socket`: on top of the config's `shared` and `socket`.
  bool shared = false;
  std::string socket{};
};

// Runs until stopped (SIGTERM, SIGINT or `trainq daemon stop`). Running jobs keep running
// after it returns. Returns the process exit code. Refuses (exit 4) a state dir or socket
// directory another user could read or plant files in (src/os/permissions.h); sets umask 077.
int RunDaemon(const DaemonOptions& options);

// `trainqd --check-config`: reads the config as RunDaemon would and prints the problems on
// stderr, each naming its option. Returns 0 when the daemon would accept it, 2 when not.
int CheckDaemonConfig(const DaemonOptions& options);

}  // namespace trainq
